package submitter

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/e31network/e31/content"
	"github.com/e31network/e31/content/image"
	"github.com/e31network/e31/market"
	"github.com/ipfs/go-cid"
)

// checkLocalSources checks that every local path a declaration stages is
// an absolute path that is there.
func checkLocalSources(decl market.Declaration) error {
	return market.CheckSources(decl, func(path string) (bool, error) {
		if !filepath.IsAbs(path) {
			return false, fmt.Errorf("%q is not an absolute path", path)
		}
		_, err := os.Stat(path)
		if errors.Is(err, os.ErrNotExist) {
			return false, nil
		}
		return err == nil, err
	})
}

// importer makes a declaration's sources exact before it is signed, in
// this node's store: a local path imported, a path inside a CID resolved,
// the image imported, and each sized, so that the signed declaration names
// exact bytes. It keeps no state of its own.
type importer struct{ *parts }

// exact makes decl's data sources and image exact, and returns the sources
// as the user gave them.
func (im importer) exact(ctx context.Context, decl *market.Declaration, progress content.Progress) ([]string, error) {
	sources := make([]string, len(decl.Data))
	for i, in := range decl.Data {
		sources[i] = in.Source
		if c, err := cid.Decode(in.Source); err == nil {
			decl.Data[i].Size = im.sizeOf(ctx, c)
			continue
		}
		if root, p, ok := market.SplitCIDPath(in.Source); ok {
			c, err := im.resolveInDAG(ctx, root, p)
			if err != nil {
				im.d.Metrics.Rejected.Inc()
				return nil, invalid(fmt.Errorf("data[%d].source %s: %w", i, in.Source, err))
			}
			decl.Data[i].Source = c.String()
			decl.Data[i].Size = im.sizeOf(ctx, c)
			continue
		}
		c, size, err := im.d.Store.Import(ctx, in.Source, content.ImportOptions{MaxBytes: im.cfg.MaxInputBytes, Progress: progress, Pin: pinImporting})
		if err != nil {
			if errors.Is(err, content.ErrTooLarge) {
				return nil, invalid(fmt.Errorf("data[%d].source: %w", i, err))
			}
			return nil, fmt.Errorf("import data[%d].source %s: %w", i, in.Source, err)
		}
		decl.Data[i].Source = c.String()
		decl.Data[i].Size = market.Size(min(max(size, 0), market.MaxInputSize))
	}
	if decl.Work.Image != "" {
		if err := im.importImage(ctx, &decl.Work, progress); err != nil {
			im.d.Metrics.Rejected.Inc()
			return nil, err
		}
	}
	return sources, nil
}

// resolveInDAG is the CID of path inside root, which this node must hold: a
// path inside a CID is resolved at submit, so that the signed declaration
// names the exact DAG a provider stages.
func (im importer) resolveInDAG(ctx context.Context, root cid.Cid, path string) (cid.Cid, error) {
	c, err := im.d.Store.Resolve(ctx, root, path)
	if err == nil {
		return c, nil
	}
	if _, rootErr := im.d.Store.Resolve(ctx, root, "."); rootErr != nil {
		return cid.Undef, fmt.Errorf("%w (a path inside a CID is resolved in this node's store, which does not hold %s: it holds the outputs of the jobs submitted here)", err, root)
	}
	return cid.Undef, fmt.Errorf("no %q inside %s: %w", path, root, err)
}

// sizeOf is the size recorded in the declaration for a root it reads: the
// bytes of the DAG when this node holds all of it, else 0 (not known; a
// provider holding it is then not preferred for it).
func (im importer) sizeOf(ctx context.Context, root cid.Cid) market.Size {
	n, err := im.d.Store.Size(ctx, root)
	if err != nil {
		return 0
	}
	return market.Size(min(max(n, 0), market.MaxInputSize))
}

// importImage imports the job's image into the store, as an image that
// e31 image ls lists, and rewrites work.image to its CID so that the signed
// declaration names exact bytes; for a registry image work.image_ref gets
// the reference pinned to the manifest digest, which lets a provider pull
// the same bytes itself. An image already named by CID must be held here.
func (im importer) importImage(ctx context.Context, w *market.Work, progress content.Progress) error {
	if im.d.Images == nil {
		return invalid(errors.New("work.image: this node cannot import images"))
	}
	rec, err := im.d.Images.Import(ctx, w.Image, progress)
	if err != nil {
		if errors.Is(err, image.ErrBadRef) || errors.Is(err, image.ErrNotFound) || errors.Is(err, image.ErrInvalid) ||
			errors.Is(err, image.ErrNoPlatform) || errors.Is(err, image.ErrAmbiguous) || errors.Is(err, image.ErrDigestMismatch) ||
			errors.Is(err, os.ErrNotExist) || errors.Is(err, content.ErrNotFound) || errors.Is(err, content.ErrTooLarge) {
			return invalid(fmt.Errorf("work.image: %w", err))
		}
		return fmt.Errorf("import work.image %s: %w", w.Image, err)
	}
	if len(w.Command) == 0 && len(rec.Entrypoint)+len(rec.Cmd) == 0 {
		return invalid(fmt.Errorf("work.command: is required: image %s has neither Entrypoint nor Cmd to run", w.Image))
	}
	w.Image = rec.CID.String()
	w.ImageSize = im.sizeOf(ctx, rec.CID)
	if w.ImageSize == 0 {
		w.ImageSize = market.Size(min(max(rec.Size, 0), market.MaxInputSize))
	}
	if rec.Pinned != "" {
		w.ImageRef = rec.Pinned
	}
	return nil
}
