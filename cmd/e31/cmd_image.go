package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"

	"github.com/e31network/e31/content/image"
	"github.com/e31network/e31/node/api"
	"github.com/spf13/cobra"
)

func newImageCommand(g *globalOptions) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "image",
		Short: "Import, list and remove job images",
		Long: `A job brings its own software as an OCI image with work.image in its
declaration. submit imports it on the way; image import does it ahead of time
and prints the CID, which a declaration can name instead of the path.

References are written as podman and skopeo write them:
  oci:PATH[:TAG]              an OCI image layout directory
  oci-archive:PATH[:TAG]      its tar (podman save --format oci-archive)
  docker-archive:PATH[:NAME]  a docker save tarball
  docker://REGISTRY/REPO[:TAG][@sha256:DIGEST]
An archive may be compressed whole with gzip, zstd or bzip2
(docker save IMAGE | gzip > img.tar.gz).`,
	}
	cmd.AddCommand(newImageImportCommand(g), newImageListCommand(g), newImageRemoveCommand(g))
	return cmd
}

type imageImportOptions struct{ json bool }

func newImageImportCommand(g *globalOptions) *cobra.Command {
	var o imageImportOptions
	cmd := &cobra.Command{
		Use:   "import SRC",
		Short: "Import an image into the daemon's store and print its CID",
		Long: `import reads the image SRC names into the daemon's content store as one DAG,
checking every blob against its digest, and prints the image's CID. Relative
paths are taken from the current folder. The image stays until e31 image rm.`,
		Example: `  podman save --format oci-archive -o trainer.tar localhost/trainer
  e31 image import oci-archive:./trainer.tar
  e31 image import docker://docker.io/library/busybox:1.36 --json`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runImageImport(cmd.Context(), o, g, args[0])
		},
	}
	cmd.Flags().BoolVar(&o.json, "json", false, "print the image as JSON")
	return cmd
}

// absImageRef makes the path of a layout or archive reference absolute
// against base; the daemon does not know the folder it was written in.
func absImageRef(ref, base string) (string, error) {
	r, err := image.ParseRef(ref)
	if err != nil {
		if h := refHint(ref, base); h != "" {
			return "", fmt.Errorf("%w: %s", err, h)
		}
		return "", err
	}
	if r.Path == "" || filepath.IsAbs(r.Path) {
		return ref, nil
	}
	return r.Abs(base).String(), nil
}

// refHint suggests what to write for a reference without a transport: a
// path here gets the transports its kind takes, a name that a registry
// could hold its docker:// form; "" for a reference that parses, or one
// that is neither.
func refHint(ref, base string) string {
	if ref == "" {
		return ""
	}
	if _, err := image.ParseRef(ref); err == nil {
		return ""
	}
	p := ref
	if !filepath.IsAbs(p) {
		p = filepath.Join(base, p)
	}
	if fi, err := os.Stat(p); err == nil {
		if fi.IsDir() {
			return fmt.Sprintf("%s is a folder here: an OCI layout folder is named oci:%s", ref, ref)
		}
		return fmt.Sprintf("%s is a file here: name it oci-archive:%s (podman save --format oci-archive) or docker-archive:%s (docker save)", ref, ref, ref)
	}
	if strings.HasPrefix(ref, ".") || strings.HasPrefix(ref, "/") || strings.Contains(ref, ".tar") {
		return fmt.Sprintf("%s: no such file or folder", ref)
	}
	if !strings.Contains(ref, ":/") {
		if _, err := image.ParseRef("docker://" + ref); err == nil {
			return fmt.Sprintf("an image in a registry is named docker://%s", ref)
		}
	}
	return ""
}

func runImageImport(ctx context.Context, o imageImportOptions, g *globalOptions, src string) error {
	wd, err := filepath.Abs(".")
	if err != nil {
		return err
	}
	ref, err := absImageRef(src, wd)
	if err != nil {
		return err
	}
	bars := newProgress(g.stderr, o.json)
	im, err := g.client().ImportImage(ctx, api.ImageImportRequest{Ref: ref}, bars.update)
	bars.finish()
	if err != nil {
		return err
	}
	if o.json {
		return g.printJSON(im)
	}
	fmt.Fprintln(g.stdout, im.CID)
	fmt.Fprintf(g.stderr, "imported %s: %d layers, %s; use it with image: %s\n", im.Ref, im.Layers, humanBytes(uint64(im.Size)), im.CID)
	return nil
}

func newImageListCommand(g *globalOptions) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:     "ls",
		Aliases: []string{"list"},
		Short:   "List the images imported into the daemon's store",
		Long: `ls lists every image imported with e31 image import or by a submit: its CID,
the reference it came from, platform, layers and size.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ims, err := g.client().Images(cmd.Context())
			if err != nil {
				return err
			}
			if asJSON {
				return g.printJSON(ims)
			}
			tw := tabwriter.NewWriter(g.stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "CID\tREF\tPLATFORM\tLAYERS\tSIZE")
			for _, im := range ims {
				ref := im.Ref
				if im.Pinned != "" {
					ref = im.Pinned
				}
				writef(tw, "%s\t%s\t%s\t%d\t%s\n", im.CID, ref, im.Platform, im.Layers, humanBytes(uint64(im.Size)))
			}
			return tw.Flush()
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the images as JSON")
	return cmd
}

func newImageRemoveCommand(g *globalOptions) *cobra.Command {
	return &cobra.Command{
		Use:     "rm CID...",
		Aliases: []string{"remove"},
		Short:   "Remove imported images",
		Long: `rm drops the daemon's hold on each image. Its blocks are freed at the store's
next garbage collection, unless a job that names the image still holds them.`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var failed []string
			for _, c := range args {
				if err := g.client().RemoveImage(cmd.Context(), c); err != nil {
					fmt.Fprintf(g.stderr, "%s: %v\n", c, err)
					failed = append(failed, c)
					continue
				}
				fmt.Fprintln(g.stdout, c)
			}
			if len(failed) > 0 {
				return fmt.Errorf("not removed: %s", strings.Join(failed, ", "))
			}
			return nil
		},
	}
}
