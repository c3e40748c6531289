package image

import (
	"bytes"
	"context"
	"fmt"
	"io"

	"github.com/e31network/e31/content"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"github.com/ipfs/go-cid"
)

// Image is an image held in the store, as Load reads it back from its DAG.
type Image struct {
	// Root is the CID of the image's DAG.
	Root cid.Cid
	// Digest is the manifest's digest.
	Digest v1.Hash
	// Manifest is the parsed manifest; RawManifest its exact bytes.
	Manifest    *v1.Manifest
	RawManifest []byte
	// Config is what a runtime needs from the image config; RawConfig
	// is the whole config, for anything else.
	Config    Config
	RawConfig []byte
	// Platform is the config's os/arch/variant, if it states one.
	Platform *v1.Platform
	// Layers are in order, lowest first.
	Layers []Layer
}

// Config is the part of the image config that says how to run it.
type Config struct {
	Entrypoint []string
	Cmd        []string
	Env        []string
	WorkingDir string
	User       string
}

// Layer is one layer of an image.
type Layer struct {
	// Digest names the blob as stored (compressed or not).
	Digest v1.Hash
	// DiffID is the digest of the uncompressed tar, from the config's
	// rootfs.diff_ids: what an unpacked layer cache is keyed by.
	DiffID    v1.Hash
	MediaType types.MediaType
	Size      int64
	// CID is the UnixFS file holding the blob.
	CID cid.Cid
}

// Compression returns "gzip", "zstd" or "" (a plain tar), from the media
// type.
func (l Layer) Compression() string {
	switch l.MediaType {
	case types.OCILayer, types.DockerLayer:
		return "gzip"
	case types.OCILayerZStd:
		return "zstd"
	}
	return ""
}

// Load reads the image whose DAG is root from the store. The DAG may have
// come from another peer, so everything is checked: index.json must name
// exactly one manifest, the manifest and config must hash to their
// digests, every layer blob must be present with its stated size, and the
// config must give one diff_id per layer. Layer bytes are checked as they
// are read, by OpenLayer. The whole DAG must be held (fetch it first).
func Load(ctx context.Context, store *content.Store, root cid.Cid) (*Image, error) {
	im, err := load(ctx, store, root)
	if err != nil {
		return nil, fmt.Errorf("image %s: %w", root, err)
	}
	return im, nil
}

func load(ctx context.Context, store *content.Store, root cid.Cid) (*Image, error) {
	held, err := store.Has(ctx, root)
	if err != nil {
		return nil, err
	}
	if !held {
		return nil, content.ErrIncomplete
	}
	index, err := readFile(ctx, store, root, "index.json", maxIndexBytes)
	if err != nil {
		return nil, err
	}
	idx, err := v1.ParseIndexManifest(bytes.NewReader(index))
	if err != nil {
		return nil, fmt.Errorf("%w: index.json: %v", ErrInvalid, err)
	}
	if len(idx.Manifests) != 1 {
		return nil, fmt.Errorf("%w: index.json lists %d manifests, want 1", ErrInvalid, len(idx.Manifests))
	}
	md := idx.Manifests[0]
	if err := checkDigest(md.Digest); err != nil {
		return nil, err
	}
	if md.Size < 0 || md.Size > maxManifestBytes {
		return nil, fmt.Errorf("%w: manifest size %d", ErrInvalid, md.Size)
	}
	raw, err := readBlob(ctx, store, root, md, maxManifestBytes)
	if err != nil {
		return nil, err
	}
	m, err := parseManifest(raw, md.MediaType)
	if err != nil {
		return nil, err
	}
	if m.Config.Size > maxConfigBytes {
		return nil, fmt.Errorf("%w: config is %d bytes", ErrInvalid, m.Config.Size)
	}
	config, err := readBlob(ctx, store, root, m.Config, maxConfigBytes)
	if err != nil {
		return nil, err
	}
	cf, err := parseConfig(config, len(m.Layers))
	if err != nil {
		return nil, err
	}
	im := &Image{
		Root:        root,
		Digest:      md.Digest,
		Manifest:    m,
		RawManifest: raw,
		Config: Config{
			Entrypoint: cf.Config.Entrypoint,
			Cmd:        cf.Config.Cmd,
			Env:        cf.Config.Env,
			WorkingDir: cf.Config.WorkingDir,
			User:       cf.Config.User,
		},
		RawConfig: config,
		Platform:  cf.Platform(),
	}
	for i, l := range m.Layers {
		c, size, err := blobFile(ctx, store, root, l.Digest)
		if err != nil {
			return nil, fmt.Errorf("layer %d (%s): %w", i, l.Digest, err)
		}
		if size != l.Size {
			return nil, fmt.Errorf("%w: layer %d blob %s holds %d bytes, the manifest says %d", ErrInvalid, i, l.Digest, size, l.Size)
		}
		im.Layers = append(im.Layers, Layer{Digest: l.Digest, DiffID: cf.RootFS.DiffIDs[i], MediaType: l.MediaType, Size: l.Size, CID: c})
	}
	return im, nil
}

// OpenLayer returns the blob of l as stored (decompress it yourself, by
// l.Compression), checking its sha256 as it is read: reading to EOF
// returns ErrDigestMismatch instead of io.EOF if the bytes are not the
// layer's.
func OpenLayer(ctx context.Context, store *content.Store, l Layer) (io.ReadCloser, error) {
	r, err := store.Open(ctx, l.CID)
	if err != nil {
		return nil, fmt.Errorf("open layer %s: %w", l.Digest, err)
	}
	return verified(r, l.Digest, l.Size)
}

// record summarises a loaded image.
func (im *Image) record(ref, pinned string) Record {
	p := plan{
		manifestDesc: v1.Descriptor{Digest: im.Digest, Size: int64(len(im.RawManifest))},
		config:       im.RawConfig,
		configFile:   &v1.ConfigFile{},
		layers:       im.Manifest.Layers,
	}
	if cf, err := v1.ParseConfigFile(bytes.NewReader(im.RawConfig)); err == nil {
		p.configFile = cf
	}
	return p.record(im.Root, ref, pinned)
}

// blobFile finds blobs/sha256/<hex> in the image DAG and returns its CID
// and size.
func blobFile(ctx context.Context, store *content.Store, root cid.Cid, d v1.Hash) (cid.Cid, int64, error) {
	if err := checkDigest(d); err != nil {
		return cid.Undef, 0, err
	}
	c, err := store.Resolve(ctx, root, blobPath(d))
	if err != nil {
		return cid.Undef, 0, fmt.Errorf("%w: blob %s: %w", ErrInvalid, d, err)
	}
	r, err := store.Open(ctx, c)
	if err != nil {
		return cid.Undef, 0, fmt.Errorf("%w: blob %s: %w", ErrInvalid, d, err)
	}
	defer r.Close()
	size, err := r.Seek(0, io.SeekEnd)
	if err != nil {
		return cid.Undef, 0, err
	}
	return c, size, nil
}

// readBlob reads a small blob of the image DAG and checks it.
func readBlob(ctx context.Context, store *content.Store, root cid.Cid, d v1.Descriptor, limit int64) ([]byte, error) {
	c, size, err := blobFile(ctx, store, root, d.Digest)
	if err != nil {
		return nil, err
	}
	if size != d.Size {
		return nil, fmt.Errorf("%w: blob %s holds %d bytes, its descriptor says %d", ErrInvalid, d.Digest, size, d.Size)
	}
	r, err := store.Open(ctx, c)
	if err != nil {
		return nil, err
	}
	return readVerified(r, d, limit)
}

// readFile reads a small file of the image DAG.
func readFile(ctx context.Context, store *content.Store, root cid.Cid, p string, limit int64) ([]byte, error) {
	c, err := store.Resolve(ctx, root, p)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrInvalid, p, err)
	}
	r, err := store.Open(ctx, c)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrInvalid, p, err)
	}
	defer r.Close()
	b, err := io.ReadAll(io.LimitReader(r, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > limit {
		return nil, fmt.Errorf("%w: %s is over %d bytes", ErrInvalid, p, limit)
	}
	return b, nil
}
