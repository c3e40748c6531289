package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"time"

	"github.com/e31network/e31/market"
	"github.com/e31network/e31/testnet/bench"
	"github.com/spf13/cobra"
)

// imageBenchOptions are the flags of the image-bench command.
type imageBenchOptions struct {
	size   string
	layers int
	runs   int
	dir    string
	json   bool
	keep   bool
}

func (o *imageBenchOptions) AddFlags(cmd *cobra.Command) {
	f := cmd.Flags()
	f.StringVar(&o.size, "size", "1GiB", "content of the imported image; the shared base is half of it, the checkpoint four times it")
	f.IntVar(&o.layers, "layers", 8, "layers of the imported image (the shared base has half as many)")
	f.IntVar(&o.runs, "runs", 20, "warm starts measured with an image and as many without")
	f.StringVar(&o.dir, "dir", "", "folder for the generated data (default: the system's temp folder); needs about 16 times --size free")
	f.BoolVar(&o.json, "json", false, "print the figures as one JSON object")
	f.BoolVar(&o.keep, "keep", false, "keep the generated data and print where")
}

func newImageBenchCommand() *cobra.Command {
	var o imageBenchOptions
	cmd := &cobra.Command{
		Use:   "image-bench",
		Short: "Measure image import, cold and warm starts, shared disk use and checkpoint layout, each against a baseline",
		Long: `image-bench measures the images feature in one run, each figure beside a
baseline taken in the same run on the same files:

  a. importing an image of --layers gzip layers holding --size of files
     into a content store, against the system's sha256sum of its blobs;
  b. a cold start on a provider: fetching the image's DAG from another
     store over the content exchange (two libp2p hosts on 127.0.0.1), then
     unpacking every layer into an empty layer cache, against tar -xzf of
     the same layer files;
  c. a warm start: a job's start (/bin/true in a busybox image, every layer
     cached) against the same job on the host's root, with runc;
  d. disk use of two images sharing a base of half --size: the store's and
     the layer cache's, against the sum of the two images' sizes;
  e. resuming from a checkpoint of four times --size: exporting it from the
     store into the job's checkpoint folder, against an overlay with an
     exported copy as its read-only lower layer (mount and first writes).

Layer files are half random, half text, so that they compress as binaries
do. Files are read from the page cache where they were just written; the
load average is printed with the figures. Figure c needs root, runc, umoci
and busybox-static, and says why where it is skipped.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runImageBench(cmd.Context(), o, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	o.AddFlags(cmd)
	return cmd
}

// imageBenchReport is what --json prints.
type imageBenchReport struct {
	SizeBytes  int64             `json:"size_bytes"`
	LoadStart  string            `json:"loadavg_start"`
	LoadEnd    string            `json:"loadavg_end"`
	Import     importFigures     `json:"import"`
	ColdStart  coldFigures       `json:"cold_start"`
	WarmStart  warmFigures       `json:"warm_start"`
	Disk       diskFigures       `json:"disk"`
	Checkpoint checkpointFigures `json:"checkpoint"`
	TookS      float64           `json:"took_s"`
}

func runImageBench(ctx context.Context, o imageBenchOptions, stdout, stderr io.Writer) error {
	size, err := market.ParseSize(o.size)
	if err != nil {
		return fmt.Errorf("--size: %w", err)
	}
	if size < 16*mib || o.layers < 2 || o.runs < 1 {
		return fmt.Errorf("--size %s, --layers %d, --runs %d: want at least 16MiB, 2 layers and 1 run", o.size, o.layers, o.runs)
	}
	total := int64(size)
	began := time.Now()
	logf := func(format string, args ...any) {
		fmt.Fprintf(stderr, "[%6.1fs] %s\n", time.Since(began).Seconds(), fmt.Sprintf(format, args...))
	}
	dir, done, err := workDir(o.dir, "e31-image-bench-", o.keep, stderr)
	if err != nil {
		return err
	}
	defer done()
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	rng := rand.New(rand.NewPCG(31, 1))
	rep := imageBenchReport{SizeBytes: total, LoadStart: bench.LoadAvg()}

	logf("a. writing an image of %d gzip layers holding %s", o.layers, humanBytes(total))
	layers, err := writeBenchLayers(filepath.Join(dir, "gen"), o.layers, total, rng)
	if err != nil {
		return err
	}
	layout := filepath.Join(dir, "layout")
	if err := writeBenchLayout(layout, layers); err != nil {
		return err
	}
	logf("a. sha256sum of its blobs, then the import into a content store")
	imp, sender, root, err := benchImport(ctx, layout, filepath.Join(dir, "a-store"), log)
	rep.Import = imp
	rep.Import.Layers = o.layers
	if err != nil {
		return fmt.Errorf("import: %w", err)
	}
	defer sender.close()
	logf("b. tar -xzf of its layers, then a fetch over the content exchange and an unpack into an empty layer cache")
	rep.ColdStart, err = benchColdStart(ctx, sender, root, layers, filepath.Join(dir, "b"), log)
	if err != nil {
		return fmt.Errorf("cold start: %w", err)
	}
	sender.close()
	for _, p := range []string{"gen", "layout", "a-store", "b"} {
		if err := os.RemoveAll(filepath.Join(dir, p)); err != nil {
			return err
		}
	}

	logf("c. %d warm starts with a busybox image, %d without", o.runs, o.runs)
	rep.WarmStart, err = benchWarmStart(ctx, filepath.Join(dir, "c"), o.runs, log)
	if err != nil {
		return fmt.Errorf("warm start: %w", err)
	}
	if rep.WarmStart.Skipped != "" {
		logf("c. skipped: %s", rep.WarmStart.Skipped)
	}

	logf("d. two images sharing a base of %s", humanBytes(total/2))
	half := max(o.layers/2, 1)
	base, err := writeBenchLayers(filepath.Join(dir, "d", "gen"), half, total/2, rng)
	if err != nil {
		return err
	}
	var tops [2]benchLayer
	for i := range tops {
		if tops[i], err = writeBenchLayer(filepath.Join(dir, "d", "gen"), total/8, rng); err != nil {
			return err
		}
	}
	rep.Disk, err = benchDisk(ctx, base, tops, filepath.Join(dir, "d"), log)
	if err != nil {
		return fmt.Errorf("disk: %w", err)
	}
	if err := os.RemoveAll(filepath.Join(dir, "d")); err != nil {
		return err
	}

	logf("e. a checkpoint of %s: export, and an overlay over an exported copy", humanBytes(4*total))
	rep.Checkpoint, err = benchCheckpoint(ctx, 4*total, 16, filepath.Join(dir, "e"), log)
	if err != nil {
		return fmt.Errorf("checkpoint: %w", err)
	}
	rep.LoadEnd = bench.LoadAvg()
	rep.TookS = time.Since(began).Seconds()
	logf("done (load %s)", rep.LoadEnd)
	if o.json {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(rep)
	}
	printImageBench(stdout, rep)
	return nil
}

func printImageBench(w io.Writer, r imageBenchReport) {
	fmt.Fprintf(w, "image-bench --size %s (an image of that many bytes unpacked): load average %s at start, %s at end; %.0f s in all\n\n", humanBytes(r.SizeBytes), r.LoadStart, r.LoadEnd, r.TookS)
	row := func(fig, what, value, baseline, ratio, note string) {
		fmt.Fprintf(w, "%-2s %-38s %-16s %-26s %-8s %s\n", fig, what, value, baseline, ratio, note)
	}
	row("", "figure", "value", "baseline", "ratio", "")
	a := r.Import
	row("a", fmt.Sprintf("import %s of blobs, %d layers", humanBytes(a.Bytes), a.Layers), fmt.Sprintf("%.0f MiB/s", a.ImportMiBps),
		fmt.Sprintf("sha256sum %.0f MiB/s", a.Sha256sumMiBps), fmt.Sprintf("%.2f", a.RatioToBaseline), "import rate / hash rate")
	b := r.ColdStart
	row("b", "cold start: fetch + unpack", fmt.Sprintf("%.2f s", b.TotalS), fmt.Sprintf("tar -xzf %.2f s", b.TarS),
		fmt.Sprintf("%.2f", b.RatioToBaseline), fmt.Sprintf("fetch %.2f s (%s, %.0f MiB/s), unpack %.2f s", b.FetchS, b.Method, float64(b.Bytes)/mib/b.FetchS, b.UnpackS))
	row("b", "  unpack alone", fmt.Sprintf("%.2f s", b.UnpackS), fmt.Sprintf("tar -xzf %.2f s", b.TarS), fmt.Sprintf("%.2f", b.UnpackS/b.TarS), "")
	c := r.WarmStart
	if c.Skipped != "" {
		row("c", "warm start", "skipped", "", "", c.Skipped)
	} else {
		row("c", "warm start, layers cached (median)", fmt.Sprintf("%.1f ms", c.ImageMs), fmt.Sprintf("no image %.1f ms", c.HostMs),
			fmt.Sprintf("%.2f", c.ImageMs/c.HostMs), fmt.Sprintf("added %+.1f ms, goal <= +%.0f ms %s (n=%d)", c.AddedMs, c.GoalMs, verdict(c.AddedMs <= c.GoalMs), c.Runs))
	}
	d := r.Disk
	row("d", fmt.Sprintf("store, 2 images, shared %s of blobs", humanBytes(d.BaseBytes)), humanBytes(d.StoreBytes), "sum "+humanBytes(d.SumBytes),
		fmt.Sprintf("%.2f", d.StoreRatio), fmt.Sprintf("sum less one base %s", humanBytes(d.SumBytes-d.BaseBytes)))
	row("d", "layer cache, same 2 images", humanBytes(d.CacheBytes), "sum "+humanBytes(d.UnpackedSumBytes),
		fmt.Sprintf("%.2f", d.CacheRatio), fmt.Sprintf("sum less one base %s; base counted once: %v", humanBytes(d.UnpackedSumBytes-d.UnpackedBaseBytes), d.BaseOnce))
	e := r.Checkpoint
	row("e", fmt.Sprintf("resume: export %s checkpoint", humanBytes(e.Bytes)), fmt.Sprintf("%.2f s", e.ExportS), "", "", fmt.Sprintf("%.0f MiB/s, %d files (import took %.2f s)", float64(e.Bytes)/mib/e.ExportS, e.Files, e.ImportS))
	if e.Skipped != "" {
		row("e", "overlay over an exported copy", "skipped", "", "", e.Skipped)
	} else {
		row("e", "overlay: export + mount + 1st rewrite", fmt.Sprintf("%.2f s", e.OverlayTotalS), fmt.Sprintf("export %.2f s", e.ExportS), fmt.Sprintf("%.2f", e.RatioToBaseline),
			fmt.Sprintf("mount %.1f ms; first write: new file %.2f ms, into a %s shard %.0f ms (copy-up); lower exported in %.2f s", e.MountMs, e.FirstNewWriteMs, humanBytes(e.CopiedUpBytes), e.FirstRewriteMs, e.LowerExportS))
		cheaper := "export alone"
		if e.OverlayTotalS < e.ExportS {
			cheaper = "the overlay"
		}
		fmt.Fprintf(w, "\ne: %s costs less. The lower layer must be laid out as files either way, so the overlay\n"+
			"   pays the export and then the mount, and its first write into a checkpoint file copies that\n"+
			"   whole file up; a plain export is already writable. An overlay pays off only where one\n"+
			"   exported checkpoint serves several runs, or must stay untouched.\n", cheaper)
	}
	fmt.Fprintf(w, "\nratio: a, rate over the baseline's (higher is better); b, c, e, time over the baseline's;\n"+
		"d, disk used over the sum of both images' sizes (the base counted twice).\n")
}

// humanBytes writes n in the largest binary unit that keeps it at 1 or more.
func humanBytes(n int64) string {
	f := float64(n)
	for _, u := range []string{"B", "KiB", "MiB", "GiB"} {
		if f < 1024 || u == "GiB" {
			if u == "B" {
				return fmt.Sprintf("%d B", n)
			}
			return fmt.Sprintf("%.1f %s", f, u)
		}
		f /= 1024
	}
	return ""
}
