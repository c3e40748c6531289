package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"

	"github.com/e31network/e31/market"
	"github.com/e31network/e31/testnet/bench/image"
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

func runImageBench(ctx context.Context, o imageBenchOptions, stdout, stderr io.Writer) error {
	size, err := market.ParseSize(o.size)
	if err != nil {
		return fmt.Errorf("--size: %w", err)
	}
	if size < 16*market.MiB || o.layers < 2 || o.runs < 1 {
		return fmt.Errorf("--size %s, --layers %d, --runs %d: want at least 16MiB, 2 layers and 1 run", o.size, o.layers, o.runs)
	}
	logf := progress(stderr)
	dir, done, err := workDir(o.dir, "e31-image-bench-", o.keep, stderr)
	if err != nil {
		return err
	}
	defer done()
	rep, err := image.Run(ctx, dir, logf, image.Options{
		Size: int64(size), Layers: o.layers, Runs: o.runs,
		Warn: slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
	})
	if err != nil {
		return err
	}
	return printReport(stdout, o.json, rep, rep.WriteText)
}
