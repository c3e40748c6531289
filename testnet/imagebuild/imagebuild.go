package imagebuild

import (
	"archive/tar"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// Missing returns the Debian packages of the programs a Builder runs that
// are not in PATH; none means a Builder can run here.
func Missing() []string {
	var pkgs []string
	for _, t := range [][2]string{{"umoci", "umoci"}, {"busybox", "busybox-static"}} {
		if _, err := exec.LookPath(t[0]); err != nil {
			pkgs = append(pkgs, t[1])
		}
	}
	return pkgs
}

// Builder builds one image, tagged Tag, in the OCI layout DIR/layout.
// It is not safe for concurrent use.
type Builder struct {
	dir    string
	tag    string
	layers int
	// rootless is umoci's --rootless, which it needs to unpack files
	// owned by others when not root.
	rootless bool
}

// New creates DIR/layout holding an empty image tagged tag. dir must
// exist; the builder also unpacks into it (DIR/layer-N).
func New(ctx context.Context, dir, tag string) (*Builder, error) {
	b := &Builder{dir: dir, tag: tag, rootless: os.Geteuid() != 0}
	if err := b.umoci(ctx, "init", "--layout", "layout"); err != nil {
		return nil, err
	}
	if err := b.umoci(ctx, "new", "--image", b.image()); err != nil {
		return nil, err
	}
	return b, nil
}

// Layout is the path of the OCI layout directory.
func (b *Builder) Layout() string { return filepath.Join(b.dir, "layout") }

// Ref is the image as a declaration names it: oci:LAYOUT:TAG.
func (b *Builder) Ref() string { return "oci:" + b.Layout() + ":" + b.tag }

func (b *Builder) image() string { return "layout:" + b.tag }

// Layer unpacks the image as it stands, calls edit with the path of its
// root, and repacks what edit changed as a new layer on top.
func (b *Builder) Layer(ctx context.Context, edit func(root string) error) error {
	b.layers++
	bundle := fmt.Sprintf("layer-%d", b.layers)
	args := []string{"unpack", "--image", b.image()}
	if b.rootless {
		args = append(args, "--rootless")
	}
	if err := b.umoci(ctx, append(args, bundle)...); err != nil {
		return err
	}
	if err := edit(filepath.Join(b.dir, bundle, "rootfs")); err != nil {
		return fmt.Errorf("layer %d: %w", b.layers, err)
	}
	args = []string{"repack", "--image", b.image()}
	if b.rootless {
		args = append(args, "--rootless")
	}
	if err := b.umoci(ctx, append(args, bundle)...); err != nil {
		return err
	}
	// umoci keeps a bundle's metadata for later repacks; this one is done.
	return os.RemoveAll(filepath.Join(b.dir, bundle))
}

// Config changes the image's config with umoci config flags, such as
// "--config.env", "PATH=/bin" or "--config.cmd=-c".
func (b *Builder) Config(ctx context.Context, flags ...string) error {
	return b.umoci(ctx, append([]string{"config", "--image", b.image()}, flags...)...)
}

func (b *Builder) umoci(ctx context.Context, args ...string) error {
	cmd := exec.CommandContext(ctx, "umoci", args...)
	cmd.Dir = b.dir
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("umoci %s: %w\n%s", strings.Join(args, " "), err, out)
	}
	return nil
}

// BusyboxRoot returns an edit that copies the host's busybox to
// /bin/busybox and links the applets to it (relative symlinks in /bin);
// with no applets named, every applet busybox --list prints.
func BusyboxRoot(applets ...string) func(root string) error {
	return func(root string) error {
		busybox, err := exec.LookPath("busybox")
		if err != nil {
			return fmt.Errorf("busybox: %w (apt-get install -y busybox-static)", err)
		}
		if len(applets) == 0 {
			out, err := exec.Command(busybox, "--list").Output()
			if err != nil {
				return fmt.Errorf("busybox --list: %w", err)
			}
			applets = strings.Fields(string(out))
		}
		bin := filepath.Join(root, "bin")
		if err := os.MkdirAll(bin, 0o755); err != nil {
			return err
		}
		data, err := os.ReadFile(busybox)
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(bin, "busybox"), data, 0o755); err != nil {
			return err
		}
		for _, a := range applets {
			if a == "busybox" || strings.Contains(a, "/") {
				continue
			}
			if err := os.Symlink("busybox", filepath.Join(bin, a)); err != nil && !errors.Is(err, fs.ErrExist) {
				return err
			}
		}
		return nil
	}
}

// Archive writes the layout as a tar at out: an oci-archive, as podman
// save --format oci-archive writes one.
func (b *Builder) Archive(out string) error { return TarDir(b.Layout(), out) }

// TarDir writes the tree at dir (regular files, directories, symlinks) as
// a tar at out, with names relative to dir.
func TarDir(dir, out string) (err error) {
	f, err := os.Create(out)
	if err != nil {
		return err
	}
	defer func() {
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}()
	tw := tar.NewWriter(f)
	err = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == dir {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		var link string
		if fi.Mode()&fs.ModeSymlink != 0 {
			if link, err = os.Readlink(p); err != nil {
				return err
			}
		}
		h, err := tar.FileInfoHeader(fi, link)
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		h.Name = filepath.ToSlash(rel)
		if fi.IsDir() {
			h.Name += "/"
		}
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		if !fi.Mode().IsRegular() {
			return nil
		}
		src, err := os.Open(p)
		if err != nil {
			return err
		}
		defer src.Close()
		_, err = io.Copy(tw, src)
		return err
	})
	if err != nil {
		return fmt.Errorf("archive %s: %w", dir, err)
	}
	return tw.Close()
}

// Gone is the file WithGone adds to the first layer and DeleteAndLink
// deletes in the second.
const Gone = "bin/gone.txt"

// WithGone is an edit that lays out a busybox root with the applets named
// and adds Gone: the first layer of the two-layer test image.
func WithGone(applets ...string) func(root string) error {
	base := BusyboxRoot(applets...)
	return func(root string) error {
		if err := base(root); err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(root, Gone), []byte("deleted in layer 2\n"), 0o644)
	}
}

// DeleteAndLink is the second layer of the two-layer test image: it deletes
// Gone (a whiteout in the layer) and adds bin/tool with bin/tool-link, a hard
// link to it. A hard link goes into a layer as a link only when its target
// is in the same layer, so both are new here.
func DeleteAndLink(root string) error {
	bin := filepath.Join(root, "bin")
	if err := os.Remove(filepath.Join(root, Gone)); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(bin, "tool"), []byte("#!/bin/sh\necho tool\n"), 0o755); err != nil {
		return err
	}
	return os.Link(filepath.Join(bin, "tool"), filepath.Join(bin, "tool-link"))
}
