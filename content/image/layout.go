package image

import (
	"archive/tar"
	"bufio"
	"bytes"
	"compress/bzip2"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"slices"
	"strings"

	"github.com/e31network/e31/content/ctxio"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"github.com/klauspost/compress/zstd"
)

// files is a read-only tree of files: a layout directory or an archive.
type files interface {
	// open returns the regular file at the slash-separated name and its
	// size.
	open(name string) (io.ReadCloser, int64, error)
	close() error
}

// dirFiles reads a directory through an os.Root, so that a symlink in a
// layout cannot make us read outside it.
type dirFiles struct{ root *os.Root }

func openDir(p string) (*dirFiles, error) {
	r, err := os.OpenRoot(p)
	if err != nil {
		return nil, err
	}
	return &dirFiles{root: r}, nil
}

func (d *dirFiles) open(name string) (io.ReadCloser, int64, error) {
	f, err := d.root.Open(name)
	if err != nil {
		return nil, 0, err
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, 0, err
	}
	if !fi.Mode().IsRegular() {
		f.Close()
		return nil, 0, fmt.Errorf("%s is not a regular file", name)
	}
	return f, fi.Size(), nil
}

func (d *dirFiles) close() error { return d.root.Close() }

// tarFiles reads the files of a tar archive in place: one pass records
// where each file's bytes lie, and each open reads that section. Nothing is
// extracted to disk.
type tarFiles struct {
	f       *os.File
	entries map[string]tarEntry
}

type tarEntry struct {
	off, size int64
	link      string // target of a symlink or hard link, as a clean name
}

// maxTarEntries bounds the index of an archive; an image archive holds a
// few files per layer.
const maxTarEntries = 100000

// openTar indexes an image archive: a tar, or a tar compressed whole with
// gzip, zstd or bzip2 (`docker save IMAGE | gzip`, nix's dockerTools), as
// docker load and skopeo take them.
func openTar(p string) (*tarFiles, error) {
	f, err := os.Open(p)
	if err != nil {
		return nil, err
	}
	if f, err = decompressed(f, p); err != nil {
		return nil, err
	}
	t := &tarFiles{f: f, entries: map[string]tarEntry{}}
	// tar.Reader reads headers block by block and seeks over file bodies
	// (f is an io.Seeker), so the file offset after Next is where the
	// entry's bytes start.
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			f.Close()
			return nil, fmt.Errorf("read archive %s: %w", p, err)
		}
		if len(t.entries) >= maxTarEntries {
			f.Close()
			return nil, fmt.Errorf("%w: archive %s has over %d entries", ErrInvalid, p, maxTarEntries)
		}
		name := cleanName(h.Name)
		switch h.Typeflag {
		case tar.TypeReg:
			off, err := f.Seek(0, io.SeekCurrent)
			if err != nil {
				f.Close()
				return nil, err
			}
			t.entries[name] = tarEntry{off: off, size: h.Size}
		case tar.TypeSymlink:
			target := h.Linkname
			if !path.IsAbs(target) {
				target = path.Join(path.Dir(name), target)
			}
			t.entries[name] = tarEntry{link: cleanName(target)}
		case tar.TypeLink:
			t.entries[name] = tarEntry{link: cleanName(h.Linkname)}
		}
	}
	return t, nil
}

// Magic numbers of whole-archive compression.
var (
	gzipMagic  = []byte{0x1f, 0x8b}
	zstdMagic  = []byte{0x28, 0xb5, 0x2f, 0xfd}
	bzip2Magic = []byte("BZh")
	xzMagic    = []byte{0xfd, '7', 'z', 'X', 'Z', 0x00}
)

// zstdMaxWindow bounds the memory a zstd frame can make the decoder take;
// zstd -19 uses 8 MiB, --long=27 128 MiB.
const zstdMaxWindow = 128 << 20

// decompressed returns f itself when it is not compressed, else the archive
// decompressed into a temporary file, already unlinked so that nothing is
// left behind however the import ends: reading an image seeks in the
// archive, which a compressed stream cannot do. f is closed either way on
// an error, and when it is replaced.
func decompressed(f *os.File, p string) (*os.File, error) {
	var head [6]byte
	n, err := f.ReadAt(head[:], 0)
	if err != nil && !errors.Is(err, io.EOF) {
		f.Close()
		return nil, fmt.Errorf("read archive %s: %w", p, err)
	}
	magic := head[:n]
	var (
		kind string
		open func(io.Reader) (io.Reader, func(), error)
	)
	switch {
	case bytes.HasPrefix(magic, gzipMagic):
		kind = "gzip"
		open = func(r io.Reader) (io.Reader, func(), error) {
			zr, err := gzip.NewReader(r)
			if err != nil {
				return nil, nil, err
			}
			return zr, func() { zr.Close() }, nil
		}
	case bytes.HasPrefix(magic, zstdMagic):
		kind = "zstd"
		open = func(r io.Reader) (io.Reader, func(), error) {
			zr, err := zstd.NewReader(r, zstd.WithDecoderMaxWindow(zstdMaxWindow), zstd.WithDecoderConcurrency(1))
			if err != nil {
				return nil, nil, err
			}
			return zr, zr.Close, nil
		}
	case bytes.HasPrefix(magic, bzip2Magic):
		kind = "bzip2"
		open = func(r io.Reader) (io.Reader, func(), error) { return bzip2.NewReader(r), func() {}, nil }
	case bytes.HasPrefix(magic, xzMagic):
		f.Close()
		return nil, fmt.Errorf("%w: archive %s is xz-compressed, which is not read here: decompress it first (xz -d) or save it with gzip or zstd", ErrInvalid, p)
	default:
		return f, nil
	}
	defer f.Close()
	tmp, err := os.CreateTemp("", "e31-image-*.tar")
	if err != nil {
		return nil, fmt.Errorf("decompress archive %s: %w", p, err)
	}
	// Unlinked at once: the open file is all that is used.
	_ = os.Remove(tmp.Name())
	fail := func(err error) (*os.File, error) {
		tmp.Close()
		return nil, fmt.Errorf("decompress archive %s (%s) into %s: %w", p, kind, os.TempDir(), err)
	}
	r, done, err := open(bufio.NewReaderSize(f, 1<<20))
	if err != nil {
		return fail(err)
	}
	defer done()
	if _, err := io.Copy(tmp, r); err != nil {
		return fail(err)
	}
	if _, err := tmp.Seek(0, io.SeekStart); err != nil {
		return fail(err)
	}
	return tmp, nil
}

func cleanName(n string) string {
	return strings.TrimPrefix(path.Clean("/"+n), "/")
}

func (t *tarFiles) open(name string) (io.ReadCloser, int64, error) {
	name = cleanName(name)
	for range 8 { // links followed at most this deep
		e, ok := t.entries[name]
		if !ok {
			return nil, 0, fmt.Errorf("%s: %w in the archive", name, fs.ErrNotExist)
		}
		if e.link == "" {
			return io.NopCloser(io.NewSectionReader(t.f, e.off, e.size)), e.size, nil
		}
		name = e.link
	}
	return nil, 0, fmt.Errorf("%w: %s: too many links", ErrInvalid, name)
}

func (t *tarFiles) close() error { return t.f.Close() }

func (t *tarFiles) has(name string) bool {
	_, ok := t.entries[name]
	return ok
}

// layoutSource reads an OCI image layout (image-spec layout.md).
type layoutSource struct{ fs files }

func blobPath(d v1.Hash) string { return "blobs/" + d.Algorithm + "/" + d.Hex }

func (l layoutSource) blob(_ context.Context, d v1.Descriptor) (io.ReadCloser, error) {
	if err := checkDigest(d.Digest); err != nil {
		return nil, err
	}
	rc, size, err := l.fs.open(blobPath(d.Digest))
	if err != nil {
		return nil, fmt.Errorf("blob %s: %w", d.Digest, err)
	}
	if size != d.Size {
		rc.Close()
		return nil, fmt.Errorf("%w: %s is %d bytes on disk, %d in its descriptor", ErrDigestMismatch, d.Digest, size, d.Size)
	}
	return rc, nil
}

func (l layoutSource) manifest(ctx context.Context, d v1.Descriptor) ([]byte, error) {
	rc, err := l.blob(ctx, d)
	if err != nil {
		return nil, err
	}
	return readVerified(rc, d, maxManifestBytes)
}

const refNameAnnotation = "org.opencontainers.image.ref.name"

// readSmall reads the file name of fsys whole. A file that cannot be
// opened is an error headed by onOpen; one over limit bytes is invalid,
// named what in the error.
func readSmall(fsys files, name string, limit int64, what, onOpen string) ([]byte, error) {
	rc, size, err := fsys.open(name)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", onOpen, err)
	}
	defer rc.Close()
	if size > limit {
		return nil, fmt.Errorf("%w: %s is %d bytes", ErrInvalid, what, size)
	}
	return io.ReadAll(rc)
}

// planLayout resolves the image that tag names in the layout (the only one
// when tag is empty) to one manifest for want.
func planLayout(ctx context.Context, fsys files, tag string, want v1.Platform) (*plan, error) {
	raw, err := readSmall(fsys, "index.json", maxIndexBytes, "index.json", "not an OCI layout")
	if err != nil {
		return nil, err
	}
	idx, err := v1.ParseIndexManifest(bytes.NewReader(raw))
	if err != nil {
		return nil, fmt.Errorf("%w: index.json: %v", ErrInvalid, err)
	}
	descs := idx.Manifests
	if tag != "" {
		var tags []string
		descs = nil
		for _, d := range idx.Manifests {
			if t := d.Annotations[refNameAnnotation]; t == tag {
				descs = append(descs, d)
			} else if t != "" {
				tags = append(tags, t)
			}
		}
		if len(descs) == 0 {
			return nil, fmt.Errorf("%w: no image tagged %q (tags: %s)", ErrNotFound, tag, strings.Join(tags, ", "))
		}
	}
	if len(descs) == 0 {
		return nil, fmt.Errorf("%w: index.json lists no images", ErrNotFound)
	}
	src := layoutSource{fsys}
	c := chooser{src: src, want: want}
	d, m, err := c.choose(ctx, descs)
	if errors.Is(err, ErrAmbiguous) && tag == "" {
		var tags []string
		for _, d := range idx.Manifests {
			if t := d.Annotations[refNameAnnotation]; t != "" {
				tags = append(tags, t)
			}
		}
		return nil, fmt.Errorf("%w; add :TAG to pick one (tags: %s)", err, strings.Join(tags, ", "))
	}
	if err != nil {
		return nil, err
	}
	return finish(ctx, src, d, m, want)
}

// dockerArchiveSource reads a docker save tarball through its
// manifest.json, which every docker save writes, also the OCI-layout
// archives of Docker 25 and later.
type dockerArchiveSource struct {
	fs    *tarFiles
	blobs map[v1.Hash]string // digest -> file in the archive
}

func (s *dockerArchiveSource) manifest(context.Context, v1.Descriptor) ([]byte, error) {
	return nil, errors.New("a docker archive has no manifests by digest")
}

func (s *dockerArchiveSource) blob(_ context.Context, d v1.Descriptor) (io.ReadCloser, error) {
	name, ok := s.blobs[d.Digest]
	if !ok {
		return nil, fmt.Errorf("blob %s: %w in the archive", d.Digest, fs.ErrNotExist)
	}
	rc, size, err := s.fs.open(name)
	if err != nil {
		return nil, err
	}
	if size != d.Size {
		rc.Close()
		return nil, fmt.Errorf("%w: %s is %d bytes in the archive, want %d", ErrDigestMismatch, d.Digest, size, d.Size)
	}
	return rc, nil
}

// dockerManifestEntry is one image of a docker save manifest.json.
type dockerManifestEntry struct {
	Config   string
	RepoTags []string
	Layers   []string
}

// planDockerArchive builds an OCI manifest for the image of a docker save
// tarball. docker save writes layers as plain tars named by anything but
// their digest, so each layer's digest is taken from the config's
// diff_ids (an uncompressed layer's digest is its diff_id) and checked as
// it is imported; a compressed layer, which older tools wrote, is hashed
// first. The layers are kept as they are in the archive.
func planDockerArchive(ctx context.Context, t *tarFiles, tag string, want v1.Platform) (*plan, error) {
	raw, err := readSmall(t, "manifest.json", maxIndexBytes, "manifest.json", "not a docker archive")
	if err != nil {
		return nil, err
	}
	var entries []dockerManifestEntry
	if err := jsonStrict(raw, &entries); err != nil {
		return nil, fmt.Errorf("%w: manifest.json: %v", ErrInvalid, err)
	}
	var e *dockerManifestEntry
	var tags []string
	for i := range entries {
		tags = append(tags, entries[i].RepoTags...)
		if tag == "" || slices.ContainsFunc(entries[i].RepoTags, func(t string) bool { return sameTag(t, tag) }) {
			if e != nil {
				return nil, fmt.Errorf("%w: the archive holds %d images; add :NAME to pick one (tags: %s)", ErrAmbiguous, len(entries), strings.Join(tags, ", "))
			}
			e = &entries[i]
		}
	}
	if e == nil {
		return nil, fmt.Errorf("%w: no image tagged %q in the archive (tags: %s)", ErrNotFound, tag, strings.Join(tags, ", "))
	}

	src := &dockerArchiveSource{fs: t, blobs: map[v1.Hash]string{}}
	config, err := readSmall(t, e.Config, maxConfigBytes, "config", "config")
	if err != nil {
		return nil, err
	}
	cf, err := parseConfig(config, len(e.Layers))
	if err != nil {
		return nil, err
	}
	if p := cf.Platform(); p != nil && !p.Satisfies(want) {
		return nil, fmt.Errorf("%w: want %s, the image is %s", ErrNoPlatform, want, p)
	}
	if len(e.Layers) > maxLayers {
		return nil, fmt.Errorf("%w: %d layers, at most %d", ErrInvalid, len(e.Layers), maxLayers)
	}
	m := v1.Manifest{
		SchemaVersion: 2,
		MediaType:     types.OCIManifestSchema1,
		Config:        v1.Descriptor{MediaType: types.OCIConfigJSON, Digest: sha256Of(config), Size: int64(len(config))},
	}
	src.blobs[m.Config.Digest] = e.Config
	for i, name := range e.Layers {
		d, err := dockerLayer(ctx, t, name, cf.RootFS.DiffIDs[i])
		if err != nil {
			return nil, fmt.Errorf("layer %d (%s): %w", i, name, err)
		}
		src.blobs[d.Digest] = name
		m.Layers = append(m.Layers, d)
	}
	raw, err = jsonMarshal(m)
	if err != nil {
		return nil, err
	}
	return &plan{
		manifest:     raw,
		manifestDesc: v1.Descriptor{MediaType: m.MediaType, Digest: sha256Of(raw), Size: int64(len(raw))},
		config:       config,
		configFile:   cf,
		layers:       m.Layers,
		src:          src,
	}, nil
}

// dockerLayer describes one layer file of a docker archive.
func dockerLayer(ctx context.Context, t *tarFiles, name string, diffID v1.Hash) (v1.Descriptor, error) {
	rc, size, err := t.open(name)
	if err != nil {
		return v1.Descriptor{}, err
	}
	defer rc.Close()
	var magic [4]byte
	n, _ := io.ReadFull(rc, magic[:])
	switch {
	case n >= 2 && magic[0] == 0x1f && magic[1] == 0x8b:
		d, err := hashFile(ctx, t, name)
		return v1.Descriptor{MediaType: types.OCILayer, Digest: d, Size: size}, err
	case n == 4 && bytes.Equal(magic[:], []byte{0x28, 0xb5, 0x2f, 0xfd}):
		d, err := hashFile(ctx, t, name)
		return v1.Descriptor{MediaType: types.OCILayerZStd, Digest: d, Size: size}, err
	}
	return v1.Descriptor{MediaType: types.OCIUncompressedLayer, Digest: diffID, Size: size}, nil
}

func hashFile(ctx context.Context, t *tarFiles, name string) (v1.Hash, error) {
	rc, _, err := t.open(name)
	if err != nil {
		return v1.Hash{}, err
	}
	defer rc.Close()
	h, _, err := v1.SHA256(ctxio.Reader(ctx, rc))
	return h, err
}

// sameTag compares docker repository tags, ignoring Docker Hub's implied
// parts: busybox:latest is docker.io/library/busybox:latest.
func sameTag(a, b string) bool {
	return a == b || normalTag(a) == normalTag(b)
}
