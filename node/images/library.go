package images

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"

	"github.com/e31network/e31/content"
	"github.com/e31network/e31/content/image"
	"github.com/e31network/e31/exec"
	"github.com/e31network/e31/exec/layers"
	"github.com/ipfs/go-cid"
)

// Options configures Open. The zero value keeps up to
// layers.DefaultCacheBytes of unpacked layers owned by exec.DefaultUIDBase.
type Options struct {
	// CacheBytes caps the unpacked layers on disk (--image-cache-size); 0
	// means layers.DefaultCacheBytes.
	CacheBytes int64
	// UIDBase is the first host uid and gid of image jobs; it must equal
	// exec.RunnerOptions.UIDBase. 0 means exec.DefaultUIDBase.
	UIDBase uint32
	// MaxImportBytes caps the blobs of one imported image; 0 is no cap.
	MaxImportBytes int64
	// MaxLayerBytes and MaxLayerEntries cap what one layer unpacks to,
	// in bytes and tar entries; 0 means exec/layers' defaults.
	MaxLayerBytes   int64
	MaxLayerEntries int
	// Import is passed to content/image for imports and pulls (platform,
	// registry auth and transport). Its MaxBytes, Pin and Progress are
	// set per call.
	Import image.Options
	// Log receives the cache's evictions and repairs; nil discards.
	Log *slog.Logger
}

// Library imports, lists and prepares images. Its methods are safe for
// concurrent use.
type Library struct {
	// Immutable after Open.
	store *content.Store
	cache *layers.Cache
	opts  Options
}

// Open opens the layer cache under dir (DATA/layers) over the node's
// content store.
func Open(ctx context.Context, store *content.Store, dir string, o Options) (*Library, error) {
	if o.UIDBase == 0 {
		o.UIDBase = exec.DefaultUIDBase
	}
	base := int(o.UIDBase)
	cache, err := layers.OpenCache(ctx, filepath.Clean(dir), layers.CacheOptions{
		MaxBytes: o.CacheBytes,
		Unpack: layers.UnpackOptions{UIDBase: base, GIDBase: base,
			MaxBytes: o.MaxLayerBytes, MaxEntries: o.MaxLayerEntries},
		Log: o.Log,
	})
	if err != nil {
		return nil, fmt.Errorf("open layer cache: %w", err)
	}
	return &Library{store: store, cache: cache, opts: o}, nil
}

// Close stops unpacks in flight and closes the cache; the store is the
// caller's.
func (l *Library) Close() error { return l.cache.Close() }

// Stats is a snapshot of the layer cache (hits, unpacks, disk use).
func (l *Library) Stats() layers.CacheStats { return l.cache.Stats() }

// Import brings the image ref names (oci:, oci-archive:, docker-archive:,
// docker:// or a CID already held) into the store, pinned as an image so
// that List shows it until Remove. Layout and archive paths must be
// absolute. A CID is checked to be a whole image here, which fails with
// image.ErrNotFound (or a content error) when it is not held.
func (l *Library) Import(ctx context.Context, ref string, progress content.Progress) (image.Record, error) {
	r, err := image.ParseRef(ref)
	if err != nil {
		return image.Record{}, err
	}
	if r.Path != "" && !filepath.IsAbs(r.Path) {
		// The daemon does not know the folder the path was written in.
		return image.Record{}, fmt.Errorf("%w: path %q must be absolute", image.ErrBadRef, r.Path)
	}
	o := l.opts.Import
	o.MaxBytes, o.Progress, o.Pin = l.opts.MaxImportBytes, progress, ""
	return image.Import(ctx, l.store, r, o)
}

// List returns the images imported into the store.
func (l *Library) List(ctx context.Context) ([]image.Record, error) {
	return image.List(ctx, l.store)
}

// Remove drops the image pins on root (image.ErrNotFound when there are
// none); GC frees the blocks no job holds.
func (l *Library) Remove(ctx context.Context, root cid.Cid) error {
	return image.Remove(ctx, l.store, root)
}

// Pull imports a digest-pinned registry reference (work.image_ref), pinned
// with pin, and returns the root; the caller checks it against the CID the
// declaration names.
func (l *Library) Pull(ctx context.Context, pinnedRef, pin string) (cid.Cid, error) {
	o := l.opts.Import
	o.MaxBytes, o.Progress, o.Pin = l.opts.MaxImportBytes, nil, pin
	return image.Pull(ctx, l.store, pinnedRef, o)
}

// Prepare reads the image root from the store (its DAG must be there) and
// acquires every layer from the cache, unpacking those it lacks. release
// gives the layers back; call it once the sandbox is gone. On error
// nothing stays acquired.
func (l *Library) Prepare(ctx context.Context, root cid.Cid) (*exec.ImageRoot, func(), error) {
	im, err := image.Load(ctx, l.store, root)
	if err != nil {
		return nil, nil, err // Load names the image
	}
	// The layers acquired so far: released here on error, by the caller
	// otherwise. A local, not a named result, so that no return statement
	// can swap it for nil before the deferred release reads it.
	var releases []func()
	releaseAll := func() {
		for _, r := range releases {
			r()
		}
	}
	ok := false
	defer func() {
		if !ok {
			releaseAll()
		}
	}()
	ir := &exec.ImageRoot{
		Layers: make([]string, len(im.Layers)),
		Config: exec.ImageConfig{
			Entrypoint: im.Config.Entrypoint,
			Cmd:        im.Config.Cmd,
			Env:        im.Config.Env,
			WorkingDir: im.Config.WorkingDir,
			User:       im.Config.User,
		},
	}
	for i, layer := range im.Layers {
		dir, rel, err := l.cache.Acquire(ctx, layers.Blob{Digest: layer.Digest.String(), MediaType: string(layer.MediaType),
			Open: func(ctx context.Context) (io.ReadCloser, error) { return image.OpenLayer(ctx, l.store, layer) }})
		if err != nil {
			return nil, nil, fmt.Errorf("image %s: layer %d (%s): %w", root, i, layer.Digest, err)
		}
		releases = append(releases, rel)
		// Load lists layers lowest first; an overlay wants the top first.
		ir.Layers[len(im.Layers)-1-i] = dir
	}
	ok = true
	return ir, releaseAll, nil
}
