package image

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"runtime"
	"time"

	"github.com/e31network/e31/content"
	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"github.com/ipfs/go-cid"
)

// Options configures Import and Pull. The zero value imports for
// linux/<GOARCH>, anonymously, without a size cap.
type Options struct {
	// Platform is the platform to pick from a multi-platform image.
	// Empty OS and Architecture mean linux and runtime.GOARCH.
	Platform v1.Platform
	// Auth authenticates to registries; nil is anonymous. Pass
	// authn.DefaultKeychain's result to use the docker login files.
	Auth authn.Authenticator
	// Transport carries registry requests; nil is go-containerregistry's
	// default.
	Transport http.RoundTripper
	// MaxBytes caps the sum of the image's blobs; 0 is no cap. It is
	// checked before any layer is read.
	MaxBytes int64
	// Pin is the reason the image's root is pinned with; empty means
	// PinReason(ref) for the reference imported.
	Pin string
	// Progress receives the bytes of blobs imported.
	Progress content.Progress
}

func (o Options) platform() v1.Platform {
	p := o.Platform
	if p.OS == "" {
		p.OS = "linux"
	}
	if p.Architecture == "" {
		p.Architecture = runtime.GOARCH
	}
	return p
}

// Record describes an imported image: what e31 image import prints and
// image ls lists.
type Record struct {
	// CID is the root of the image's DAG; it names the image on the
	// network.
	CID cid.Cid `json:"cid"`
	// Ref is the reference as given, such as oci-archive:./trainer.tar.
	Ref string `json:"ref"`
	// Pinned is the docker:// reference pinned to the manifest digest,
	// for an image from a registry; empty otherwise.
	Pinned string `json:"pinned,omitempty"`
	// Digest is the digest of the image manifest.
	Digest string `json:"digest"`
	// Platform is os/arch[/variant] from the image config.
	Platform string `json:"platform"`
	// Size is the sum of the blobs: manifest, config and layers as stored
	// (compressed or not, as the source had them).
	Size int64 `json:"size"`
	// Layers is the number of layers.
	Layers int `json:"layers"`
	// Created is the creation time the image config states; zero if none.
	Created time.Time `json:"created,omitzero"`
	// Entrypoint and Cmd are what the image runs when a job gives no
	// command: Entrypoint followed by Cmd.
	Entrypoint []string `json:"entrypoint,omitempty"`
	Cmd        []string `json:"cmd,omitempty"`
}

// PinPrefix begins every pin reason that Import uses, so List can tell
// image pins from job inputs and outputs.
const PinPrefix = "image: "

// PinReason is the pin reason of an image imported from ref.
func PinReason(ref string) string { return PinPrefix + ref }

// Import brings the image ref names into the store as one DAG laid out
// like an OCI image layout with a single image:
//
//	oci-layout
//	index.json                the chosen manifest, and nothing else
//	blobs/sha256/<hex>        the manifest, the config, every layer
//
// Each blob is a UnixFS file of exactly its bytes (layers stay compressed
// as the source had them), so the DAG moves between peers like any input
// and two images sharing a layer share its blocks. Every blob is checked
// against its digest as it streams into the store; a mismatch fails with
// ErrDigestMismatch and pins nothing. The root is pinned with o.Pin, or
// PinReason(ref.String()).
//
// A docker:// tag is resolved to the digest of the image manifest for the
// platform, and Record.Pinned names it, so the signed declaration can name
// exact bytes in the registry too. A CID reference imports nothing: the
// image must already be held; it is checked with Load and pinned.
func Import(ctx context.Context, store *content.Store, ref Ref, o Options) (Record, error) {
	pin := o.Pin
	if pin == "" {
		pin = PinReason(ref.String())
	}
	var (
		p      *plan
		pinned string
		err    error
	)
	switch ref.Transport {
	case CID:
		im, err := Load(ctx, store, ref.Root)
		if err != nil {
			return Record{}, fmt.Errorf("import %s: %w", ref, err)
		}
		if err := store.Pin(ctx, ref.Root, pin); err != nil {
			return Record{}, fmt.Errorf("import %s: %w", ref, err)
		}
		return im.record(ref.String(), ""), nil
	case Docker:
		var d name.Digest
		p, d, err = planRegistry(ctx, ref.Name, o)
		pinned = "docker://" + d.String()
	case OCI:
		var fs *dirFiles
		if err = wrongTransport(ref); err == nil {
			fs, err = openDir(ref.Path)
		}
		if err == nil {
			defer fs.close()
			p, err = planLayout(ctx, fs, ref.Tag, o.platform())
		}
	case OCIArchive:
		var fs *tarFiles
		if err = wrongTransport(ref); err == nil {
			fs, err = openTar(ref.Path)
		}
		if err == nil {
			defer fs.close()
			p, err = planLayout(ctx, fs, ref.Tag, o.platform())
			if err != nil && lacks(fs, "index.json") && !lacks(fs, "manifest.json") {
				err = fmt.Errorf("%w: %s is a docker save archive (manifest.json, no index.json): name it docker-archive:%s", ErrBadRef, ref.Path, ref.Path)
			}
		}
	case DockerArchive:
		var fs *tarFiles
		if err = wrongTransport(ref); err == nil {
			fs, err = openTar(ref.Path)
		}
		if err == nil {
			defer fs.close()
			p, err = planDockerArchive(ctx, fs, ref.Tag, o.platform())
			if err != nil && lacks(fs, "manifest.json") && !lacks(fs, "index.json") {
				err = fmt.Errorf("%w: %s is an OCI archive (index.json, no manifest.json): name it oci-archive:%s", ErrBadRef, ref.Path, ref.Path)
			}
		}
	default:
		err = fmt.Errorf("%w: unknown transport %q", ErrBadRef, ref.Transport)
	}
	if err != nil {
		return Record{}, fmt.Errorf("import %s: %w", ref, err)
	}
	root, _, err := store.ImportTree(ctx, p.tree(), content.ImportOptions{MaxBytes: o.MaxBytes, Pin: pin, Progress: o.Progress})
	if err != nil {
		return Record{}, fmt.Errorf("import %s: %w", ref, err)
	}
	return p.record(root, ref.String(), pinned), nil
}

// wrongTransport refuses a reference whose transport cannot fit what is at
// its path, naming one that can: a folder named as an archive, or a file as
// a layout folder. Nothing there is left to the open, which says so.
func wrongTransport(ref Ref) error {
	fi, err := os.Stat(ref.Path)
	if err != nil {
		return nil
	}
	switch {
	case ref.Transport == OCI && !fi.IsDir():
		return fmt.Errorf("%w: %s is a file, not an OCI layout folder: name an archive oci-archive:%s (podman save --format oci-archive) or docker-archive:%s (docker save)", ErrBadRef, ref.Path, ref.Path, ref.Path)
	case ref.Transport != OCI && fi.IsDir():
		return fmt.Errorf("%w: %s is a folder, not an archive: name an OCI layout folder oci:%s", ErrBadRef, ref.Path, ref.Path)
	}
	return nil
}

// lacks reports whether an archive has no file name.
func lacks(t *tarFiles, name string) bool {
	_, ok := t.entries[cleanName(name)]
	return !ok
}

// Pull imports an image from a registry by a digest-pinned reference
// (docker://REGISTRY/REPO@sha256:…, the work.image_ref of a declaration),
// for a provider that pulls images itself. A reference without a digest
// is refused with ErrNotPinned: a tag could name other bytes than the
// submitter signed. The caller compares the CID with the declared one;
// for the same manifest and platform they are equal.
func Pull(ctx context.Context, store *content.Store, pinnedRef string, o Options) (cid.Cid, error) {
	ref, err := ParseRef(pinnedRef)
	if err != nil {
		return cid.Undef, err
	}
	if ref.Transport != Docker {
		return cid.Undef, fmt.Errorf("%w: pull %q: want a docker:// reference", ErrBadRef, pinnedRef)
	}
	if !ref.Pinned() {
		return cid.Undef, fmt.Errorf("pull %s: %w", pinnedRef, ErrNotPinned)
	}
	rec, err := Import(ctx, store, ref, o)
	if err != nil {
		return cid.Undef, err
	}
	return rec.CID, nil
}

// ociLayout is the oci-layout file of image-spec 1.x.
var ociLayout = []byte(`{"imageLayoutVersion":"1.0.0"}`)

// tree lists the files of the image's DAG. index.json is written here,
// not copied, so the root depends only on the manifest: the same image
// imported from a layout, an archive or a registry has the same CID.
func (p *plan) tree() []content.TreeFile {
	md := p.manifestDesc
	md.Platform = p.configFile.Platform()
	index, err := jsonMarshal(v1.IndexManifest{
		SchemaVersion: 2,
		MediaType:     types.OCIImageIndex,
		Manifests:     []v1.Descriptor{md},
	})
	if err != nil {
		panic(err) // a struct of strings and numbers always encodes
	}
	files := []content.TreeFile{
		memFile("oci-layout", ociLayout),
		memFile("index.json", index),
		memFile(blobPath(p.manifestDesc.Digest), p.manifest),
	}
	seen := map[v1.Hash]bool{p.manifestDesc.Digest: true}
	cd := sha256Of(p.config)
	if !seen[cd] {
		seen[cd] = true
		files = append(files, memFile(blobPath(cd), p.config))
	}
	for _, l := range p.layers {
		if seen[l.Digest] {
			continue // the same layer twice is one blob
		}
		seen[l.Digest] = true
		files = append(files, content.TreeFile{
			Path: blobPath(l.Digest),
			Size: l.Size,
			Open: func(ctx context.Context) (io.ReadCloser, error) {
				rc, err := p.src.blob(ctx, l)
				if err != nil {
					return nil, err
				}
				return verified(rc, l.Digest, l.Size)
			},
		})
	}
	return files
}

func memFile(path string, b []byte) content.TreeFile {
	return content.TreeFile{Path: path, Size: int64(len(b)), Open: func(context.Context) (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(b)), nil
	}}
}

func (p *plan) record(root cid.Cid, ref, pinned string) Record {
	size := p.manifestDesc.Size + int64(len(p.config))
	for _, l := range p.layers {
		size += l.Size
	}
	r := Record{
		CID:        root,
		Ref:        ref,
		Pinned:     pinned,
		Digest:     p.manifestDesc.Digest.String(),
		Size:       size,
		Layers:     len(p.layers),
		Created:    p.configFile.Created.Time,
		Entrypoint: p.configFile.Config.Entrypoint,
		Cmd:        p.configFile.Config.Cmd,
	}
	if pl := p.configFile.Platform(); pl != nil {
		r.Platform = pl.String()
	}
	return r
}
