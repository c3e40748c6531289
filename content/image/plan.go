package image

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"slices"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// Bounds on what an image may hold. They are far above real images and
// keep a hostile source or DAG from making us allocate without limit.
const (
	maxIndexBytes    = 4 << 20
	maxManifestBytes = 4 << 20
	maxConfigBytes   = 16 << 20
	maxLayers        = 512
	maxIndexDepth    = 4
)

// source is where an image's manifests and blobs come from: a layout
// directory, an archive, a registry.
type source interface {
	// manifest returns the manifest or index that d names, checked
	// against d's digest and size.
	manifest(ctx context.Context, d v1.Descriptor) ([]byte, error)
	// blob opens the config or layer that d names. The bytes are not
	// checked yet; the caller wraps them with verified.
	blob(ctx context.Context, d v1.Descriptor) (io.ReadCloser, error)
}

// plan is one image, resolved to a single manifest, with its small parts
// read and checked, ready to be imported.
type plan struct {
	manifest     []byte
	manifestDesc v1.Descriptor // digest, size and media type of manifest
	config       []byte
	configFile   *v1.ConfigFile
	layers       []v1.Descriptor
	src          source
}

func isIndex(mt types.MediaType) bool {
	return mt == types.OCIImageIndex || mt == types.DockerManifestList
}

func isManifest(mt types.MediaType) bool {
	return mt == types.OCIManifestSchema1 || mt == types.DockerManifestSchema2
}

func kindOf(mt types.MediaType) string {
	switch {
	case isIndex(mt):
		return "index"
	case isManifest(mt):
		return "manifest"
	case mt == types.OCIConfigJSON || mt == types.DockerConfigJSON:
		return "config"
	}
	return "blob"
}

func isLayer(mt types.MediaType) bool {
	switch mt {
	case types.OCILayer, types.OCILayerZStd, types.OCIUncompressedLayer,
		types.DockerLayer, types.DockerUncompressedLayer:
		return true
	}
	return false
}

// chooser picks one image manifest for a platform out of an index tree.
type chooser struct {
	src  source
	want v1.Platform
	seen []string // platforms met, for the error
}

// choose returns the single image manifest among descs (recursing into
// indexes) that runs on c.want. A manifest with no platform in its
// descriptor is a candidate; its config is checked later.
func (c *chooser) choose(ctx context.Context, descs []v1.Descriptor) (v1.Descriptor, []byte, error) {
	type found struct {
		d   v1.Descriptor
		raw []byte
	}
	var hits []found
	var walk func(descs []v1.Descriptor, depth int) error
	walk = func(descs []v1.Descriptor, depth int) error {
		if depth > maxIndexDepth {
			return fmt.Errorf("%w: indexes nested more than %d deep", ErrInvalid, maxIndexDepth)
		}
		for _, d := range descs {
			if d.Platform != nil {
				c.seen = append(c.seen, d.Platform.String())
				if !d.Platform.Satisfies(c.want) {
					continue
				}
			}
			switch {
			case isIndex(d.MediaType):
				raw, err := c.src.manifest(ctx, d)
				if err != nil {
					return err
				}
				idx, err := v1.ParseIndexManifest(bytes.NewReader(raw))
				if err != nil {
					return fmt.Errorf("%w: index %s: %v", ErrInvalid, d.Digest, err)
				}
				if err := walk(idx.Manifests, depth+1); err != nil {
					return err
				}
			case isManifest(d.MediaType):
				if slices.ContainsFunc(hits, func(f found) bool { return f.d.Digest == d.Digest }) {
					continue
				}
				hits = append(hits, found{d: d})
			default:
				// Attestations, signatures and other artifacts: not an
				// image to run.
			}
		}
		return nil
	}
	if err := walk(descs, 0); err != nil {
		return v1.Descriptor{}, nil, err
	}
	switch len(hits) {
	case 0:
		slices.Sort(c.seen)
		seen := slices.Compact(c.seen)
		if len(seen) == 0 {
			return v1.Descriptor{}, nil, fmt.Errorf("%w: no image manifest found", ErrInvalid)
		}
		return v1.Descriptor{}, nil, fmt.Errorf("%w: want %s, the image has %s", ErrNoPlatform, c.want, strings.Join(seen, ", "))
	case 1:
	default:
		var ds []string
		for _, h := range hits {
			ds = append(ds, h.d.Digest.String())
		}
		return v1.Descriptor{}, nil, fmt.Errorf("%w: %d manifests for %s (%s)", ErrAmbiguous, len(hits), c.want, strings.Join(ds, ", "))
	}
	d := hits[0].d
	raw, err := c.src.manifest(ctx, d)
	if err != nil {
		return v1.Descriptor{}, nil, err
	}
	return d, raw, nil
}

// finish reads the config of the manifest d (raw), checks the image, and
// returns the plan.
func finish(ctx context.Context, src source, d v1.Descriptor, raw []byte, want v1.Platform) (*plan, error) {
	m, err := parseManifest(raw, d.MediaType)
	if err != nil {
		return nil, err
	}
	rc, err := src.blob(ctx, m.Config)
	if err != nil {
		return nil, fmt.Errorf("config %s: %w", m.Config.Digest, err)
	}
	config, err := readVerified(rc, m.Config, maxConfigBytes)
	if err != nil {
		return nil, fmt.Errorf("config %s: %w", m.Config.Digest, err)
	}
	cf, err := parseConfig(config, len(m.Layers))
	if err != nil {
		return nil, err
	}
	if p := cf.Platform(); p != nil && !p.Satisfies(want) {
		return nil, fmt.Errorf("%w: want %s, the image is %s", ErrNoPlatform, want, p)
	}
	return &plan{
		manifest:     raw,
		manifestDesc: v1.Descriptor{MediaType: d.MediaType, Digest: d.Digest, Size: int64(len(raw))},
		config:       config,
		configFile:   cf,
		layers:       m.Layers,
		src:          src,
	}, nil
}

// parseManifest decodes an image manifest and checks what we rely on:
// sha256 digests, layers we can unpack (no foreign layers fetched from
// elsewhere), a bounded number of them.
func parseManifest(raw []byte, mt types.MediaType) (*v1.Manifest, error) {
	m, err := v1.ParseManifest(bytes.NewReader(raw))
	if err != nil {
		return nil, fmt.Errorf("%w: manifest: %v", ErrInvalid, err)
	}
	if m.MediaType != "" && m.MediaType != mt {
		return nil, fmt.Errorf("%w: manifest says it is %s, its descriptor %s", ErrInvalid, m.MediaType, mt)
	}
	if !isManifest(mt) {
		return nil, fmt.Errorf("%w: %q is not an image manifest", ErrInvalid, mt)
	}
	if m.SchemaVersion != 2 {
		return nil, fmt.Errorf("%w: manifest schema version %d, want 2", ErrInvalid, m.SchemaVersion)
	}
	if err := checkDigest(m.Config.Digest); err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	if m.Config.Size < 0 {
		return nil, fmt.Errorf("%w: config size %d", ErrInvalid, m.Config.Size)
	}
	if len(m.Layers) > maxLayers {
		return nil, fmt.Errorf("%w: %d layers, at most %d", ErrInvalid, len(m.Layers), maxLayers)
	}
	// One digest is one blob: every descriptor naming it must say the same
	// size, or an image imported here (which stores the blob once) would be
	// refused by every provider that loads it.
	sizes := map[v1.Hash]int64{m.Config.Digest: m.Config.Size}
	for i, l := range m.Layers {
		if err := checkDigest(l.Digest); err != nil {
			return nil, fmt.Errorf("layer %d: %w", i, err)
		}
		if size, ok := sizes[l.Digest]; ok && size != l.Size {
			return nil, fmt.Errorf("%w: layer %d names blob %s with %d bytes, and another descriptor with %d", ErrInvalid, i, l.Digest, l.Size, size)
		}
		sizes[l.Digest] = l.Size
		if !isLayer(l.MediaType) {
			return nil, fmt.Errorf("%w: layer %d has media type %q, want a tar, tar+gzip or tar+zstd layer", ErrInvalid, i, l.MediaType)
		}
		if l.Size < 0 || len(l.URLs) > 0 {
			return nil, fmt.Errorf("%w: layer %d: negative size or foreign URLs", ErrInvalid, i)
		}
	}
	return m, nil
}

// parseConfig decodes an image config and checks that it names one
// uncompressed digest per layer.
func parseConfig(raw []byte, layers int) (*v1.ConfigFile, error) {
	cf, err := v1.ParseConfigFile(bytes.NewReader(raw))
	if err != nil {
		return nil, fmt.Errorf("%w: config: %v", ErrInvalid, err)
	}
	if n := len(cf.RootFS.DiffIDs); n != layers {
		return nil, fmt.Errorf("%w: config lists %d diff_ids for %d layers", ErrInvalid, n, layers)
	}
	for i, d := range cf.RootFS.DiffIDs {
		if err := checkDigest(d); err != nil {
			return nil, fmt.Errorf("diff_id %d: %w", i, err)
		}
	}
	return cf, nil
}
