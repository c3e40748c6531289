package image

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"time"

	"github.com/e31network/e31/testnet/bench"
)

// Options size a run.
type Options struct {
	// Size is the content of the imported image, in bytes (at least 16
	// MiB); the shared base is half of it, the checkpoint four times it.
	Size int64
	// Layers is the imported image's layer count (at least 2); the shared
	// base has half as many.
	Layers int
	// Runs is how many warm starts are measured with an image, and as many
	// without.
	Runs int
	// Warn receives the content store's warnings; nil discards them.
	Warn *slog.Logger
}

// Report is what --json prints.
type Report struct {
	SizeBytes  int64             `json:"size_bytes"`
	LoadStart  string            `json:"loadavg_start"`
	LoadEnd    string            `json:"loadavg_end"`
	Import     ImportFigures     `json:"import"`
	ColdStart  ColdFigures       `json:"cold_start"`
	WarmStart  WarmFigures       `json:"warm_start"`
	Disk       DiskFigures       `json:"disk"`
	Checkpoint CheckpointFigures `json:"checkpoint"`
	TookS      float64           `json:"took_s"`
}

// Run generates the images and the checkpoint in dir and measures figures
// a to e on them, one after another; logf, if not nil, receives progress
// lines.
func Run(ctx context.Context, dir string, logf func(format string, args ...any), o Options) (Report, error) {
	if o.Size < 16*mib || o.Layers < 2 || o.Runs < 1 {
		return Report{}, fmt.Errorf("image size %d, %d layers, %d runs: want at least 16MiB, 2 layers and 1 run", o.Size, o.Layers, o.Runs)
	}
	total := o.Size
	began := time.Now()
	logf = bench.Env{Log: logf}.Logf
	log := o.Warn
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	rng := rand.New(rand.NewPCG(31, 1))
	rep := Report{SizeBytes: total, LoadStart: bench.LoadAvg()}

	logf("a. writing an image of %d gzip layers holding %s", o.Layers, bench.HumanBytes(total))
	layers, err := writeBenchLayers(filepath.Join(dir, "gen"), o.Layers, total, rng)
	if err != nil {
		return rep, err
	}
	layout := filepath.Join(dir, "layout")
	if err := writeBenchLayout(layout, layers); err != nil {
		return rep, err
	}
	logf("a. sha256sum of its blobs, then the import into a content store")
	imp, sender, root, err := benchImport(ctx, layout, filepath.Join(dir, "a-store"), log)
	rep.Import = imp
	rep.Import.Layers = o.Layers
	if err != nil {
		return rep, fmt.Errorf("import: %w", err)
	}
	defer sender.close()
	logf("b. tar -xzf of its layers, then a fetch over the content exchange and an unpack into an empty layer cache")
	rep.ColdStart, err = benchColdStart(ctx, sender, root, layers, filepath.Join(dir, "b"), log)
	if err != nil {
		return rep, fmt.Errorf("cold start: %w", err)
	}
	sender.close()
	for _, p := range []string{"gen", "layout", "a-store", "b"} {
		if err := os.RemoveAll(filepath.Join(dir, p)); err != nil {
			return rep, err
		}
	}

	logf("c. %d warm starts with a busybox image, %d without", o.Runs, o.Runs)
	rep.WarmStart, err = benchWarmStart(ctx, filepath.Join(dir, "c"), o.Runs, log)
	if err != nil {
		return rep, fmt.Errorf("warm start: %w", err)
	}
	if rep.WarmStart.Skipped != "" {
		logf("c. skipped: %s", rep.WarmStart.Skipped)
	}

	logf("d. two images sharing a base of %s", bench.HumanBytes(total/2))
	half := max(o.Layers/2, 1)
	base, err := writeBenchLayers(filepath.Join(dir, "d", "gen"), half, total/2, rng)
	if err != nil {
		return rep, err
	}
	var tops [2]benchLayer
	for i := range tops {
		if tops[i], err = writeBenchLayer(filepath.Join(dir, "d", "gen"), total/8, rng); err != nil {
			return rep, err
		}
	}
	rep.Disk, err = benchDisk(ctx, base, tops, filepath.Join(dir, "d"), log)
	if err != nil {
		return rep, fmt.Errorf("disk: %w", err)
	}
	if err := os.RemoveAll(filepath.Join(dir, "d")); err != nil {
		return rep, err
	}

	logf("e. a checkpoint of %s: export, and an overlay over an exported copy", bench.HumanBytes(4*total))
	rep.Checkpoint, err = benchCheckpoint(ctx, 4*total, 16, filepath.Join(dir, "e"), log)
	if err != nil {
		return rep, fmt.Errorf("checkpoint: %w", err)
	}
	rep.LoadEnd = bench.LoadAvg()
	rep.TookS = time.Since(began).Seconds()
	logf("done (load %s)", rep.LoadEnd)
	return rep, nil
}

// WriteText prints figures a to e, each beside its baseline, and how to
// read the ratios.
func (r Report) WriteText(w io.Writer) error {
	fmt.Fprintf(w, "image-bench --size %s (an image of that many bytes unpacked): load average %s at start, %s at end; %.0f s in all\n\n", bench.HumanBytes(r.SizeBytes), r.LoadStart, r.LoadEnd, r.TookS)
	row := func(fig, what, value, baseline, ratio, note string) {
		fmt.Fprintf(w, "%-2s %-38s %-16s %-26s %-8s %s\n", fig, what, value, baseline, ratio, note)
	}
	row("", "figure", "value", "baseline", "ratio", "")
	a := r.Import
	row("a", fmt.Sprintf("import %s of blobs, %d layers", bench.HumanBytes(a.Bytes), a.Layers), fmt.Sprintf("%.0f MiB/s", a.ImportMiBps),
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
			fmt.Sprintf("%.2f", c.ImageMs/c.HostMs), fmt.Sprintf("added %+.1f ms, goal <= +%.0f ms %s (n=%d)", c.AddedMs, c.GoalMs, bench.Verdict(c.AddedMs <= c.GoalMs), c.Runs))
	}
	d := r.Disk
	row("d", fmt.Sprintf("store, 2 images, shared %s of blobs", bench.HumanBytes(d.BaseBytes)), bench.HumanBytes(d.StoreBytes), "sum "+bench.HumanBytes(d.SumBytes),
		fmt.Sprintf("%.2f", d.StoreRatio), fmt.Sprintf("sum less one base %s", bench.HumanBytes(d.SumBytes-d.BaseBytes)))
	row("d", "layer cache, same 2 images", bench.HumanBytes(d.CacheBytes), "sum "+bench.HumanBytes(d.UnpackedSumBytes),
		fmt.Sprintf("%.2f", d.CacheRatio), fmt.Sprintf("sum less one base %s; base counted once: %v", bench.HumanBytes(d.UnpackedSumBytes-d.UnpackedBaseBytes), d.BaseOnce))
	e := r.Checkpoint
	row("e", fmt.Sprintf("resume: export %s checkpoint", bench.HumanBytes(e.Bytes)), fmt.Sprintf("%.2f s", e.ExportS), "", "", fmt.Sprintf("%.0f MiB/s, %d files (import took %.2f s)", float64(e.Bytes)/mib/e.ExportS, e.Files, e.ImportS))
	if e.Skipped != "" {
		row("e", "overlay over an exported copy", "skipped", "", "", e.Skipped)
	} else {
		row("e", "overlay: export + mount + 1st rewrite", fmt.Sprintf("%.2f s", e.OverlayTotalS), fmt.Sprintf("export %.2f s", e.ExportS), fmt.Sprintf("%.2f", e.RatioToBaseline),
			fmt.Sprintf("mount %.1f ms; first write: new file %.2f ms, into a %s shard %.0f ms (copy-up); lower exported in %.2f s", e.MountMs, e.FirstNewWriteMs, bench.HumanBytes(e.CopiedUpBytes), e.FirstRewriteMs, e.LowerExportS))
		cheaper := "export alone"
		if e.OverlayTotalS < e.ExportS {
			cheaper = "the overlay"
		}
		fmt.Fprintf(w, "\ne: %s costs less. The lower layer must be laid out as files either way, so the overlay\n"+
			"   pays the export and then the mount, and its first write into a checkpoint file copies that\n"+
			"   whole file up; a plain export is already writable. An overlay pays off only where one\n"+
			"   exported checkpoint serves several runs, or must stay untouched.\n", cheaper)
	}
	_, err := fmt.Fprintf(w, "\nratio: a, rate over the baseline's (higher is better); b, c, e, time over the baseline's;\n"+
		"d, disk used over the sum of both images' sizes (the base counted twice).\n")
	return err
}
