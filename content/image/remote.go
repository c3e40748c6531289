package image

import (
	"context"
	"fmt"
	"io"
	"net/http"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"
)

// registrySource reads an image from a registry. Manifests come through
// remote.Get; blobs are fetched here, over go-containerregistry's
// authenticating transport, so that every byte goes through verified and a
// bad blob is ErrDigestMismatch rather than a library's message.
type registrySource struct {
	repo   name.Repository
	opts   []remote.Option
	client *http.Client
}

func newRegistrySource(ctx context.Context, repo name.Repository, o Options) (*registrySource, error) {
	auth := o.Auth
	if auth == nil {
		auth = authn.Anonymous
	}
	base := o.Transport
	if base == nil {
		base = remote.DefaultTransport
	}
	rt, err := transport.NewWithContext(ctx, repo.Registry, auth, base, []string{repo.Scope(transport.PullScope)})
	if err != nil {
		return nil, fmt.Errorf("registry %s: %w", repo.RegistryStr(), err)
	}
	return &registrySource{
		repo:   repo,
		opts:   []remote.Option{remote.WithContext(ctx), remote.WithAuth(auth), remote.WithTransport(base)},
		client: &http.Client{Transport: rt},
	}, nil
}

// get fetches the manifest or index that ref names and checks its bytes
// against their digest: by digest, the one asked for; by tag, the one the
// registry states, which is then the digest that pins the tag.
func (r *registrySource) get(ctx context.Context, ref name.Reference) (v1.Descriptor, []byte, error) {
	desc, err := remote.Get(ref, append(r.opts, remote.WithContext(ctx))...)
	if err != nil {
		return v1.Descriptor{}, nil, fmt.Errorf("get %s: %w", ref, err)
	}
	d := v1.Descriptor{MediaType: desc.MediaType, Digest: desc.Digest, Size: desc.Size}
	if dr, ok := ref.(name.Digest); ok && dr.DigestStr() != d.Digest.String() {
		return v1.Descriptor{}, nil, fmt.Errorf("%w: asked for %s, the registry says %s", ErrDigestMismatch, dr.DigestStr(), d.Digest)
	}
	if int64(len(desc.Manifest)) != d.Size || d.Size > maxManifestBytes {
		return v1.Descriptor{}, nil, fmt.Errorf("%w: manifest %s is %d bytes, stated %d", ErrDigestMismatch, d.Digest, len(desc.Manifest), d.Size)
	}
	if err := checkBytes(desc.Manifest, d.Digest); err != nil {
		return v1.Descriptor{}, nil, fmt.Errorf("manifest of %s: %w", ref, err)
	}
	return d, desc.Manifest, nil
}

func (r *registrySource) manifest(ctx context.Context, d v1.Descriptor) ([]byte, error) {
	got, raw, err := r.get(ctx, r.repo.Digest(d.Digest.String()))
	if err != nil {
		return nil, err
	}
	if got.Size != d.Size {
		return nil, fmt.Errorf("%w: manifest %s is %d bytes, its descriptor says %d", ErrDigestMismatch, d.Digest, got.Size, d.Size)
	}
	return raw, nil
}

func (r *registrySource) blob(ctx context.Context, d v1.Descriptor) (io.ReadCloser, error) {
	if err := checkDigest(d.Digest); err != nil {
		return nil, err
	}
	u := fmt.Sprintf("%s://%s/v2/%s/blobs/%s", r.repo.Scheme(), r.repo.RegistryStr(), r.repo.RepositoryStr(), d.Digest)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, err
	}
	resp, err := r.client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("blob %s: %w", d.Digest, err)
	}
	if err := transport.CheckError(resp, http.StatusOK); err != nil {
		resp.Body.Close()
		return nil, fmt.Errorf("blob %s: %w", d.Digest, err)
	}
	if resp.ContentLength >= 0 && resp.ContentLength != d.Size {
		resp.Body.Close()
		return nil, fmt.Errorf("%w: blob %s is %d bytes, want %d", ErrDigestMismatch, d.Digest, resp.ContentLength, d.Size)
	}
	return resp.Body, nil
}

// planRegistry resolves ref to one image manifest for want. It returns the
// plan and the manifest's digest-pinned reference.
func planRegistry(ctx context.Context, ref name.Reference, o Options) (*plan, name.Digest, error) {
	src, err := newRegistrySource(ctx, ref.Context(), o)
	if err != nil {
		return nil, name.Digest{}, err
	}
	d, raw, err := src.get(ctx, ref)
	if err != nil {
		return nil, name.Digest{}, err
	}
	if isIndex(d.MediaType) {
		c := chooser{src: src, want: o.platform()}
		d, raw, err = c.choose(ctx, []v1.Descriptor{d})
		if err != nil {
			return nil, name.Digest{}, fmt.Errorf("%s: %w", ref, err)
		}
	}
	p, err := finish(ctx, src, d, raw, o.platform())
	if err != nil {
		return nil, name.Digest{}, fmt.Errorf("%s: %w", ref, err)
	}
	return p, ref.Context().Digest(d.Digest.String()), nil
}
