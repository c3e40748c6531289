package image

import (
	"fmt"
	"path/filepath"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/ipfs/go-cid"
)

// Transport says where an image comes from; the names are skopeo's.
type Transport string

const (
	// OCI is an OCI image layout directory: oci:PATH[:TAG].
	OCI Transport = "oci"
	// OCIArchive is a tar of an OCI layout: oci-archive:PATH[:TAG].
	OCIArchive Transport = "oci-archive"
	// DockerArchive is a docker save tarball: docker-archive:PATH[:NAME].
	DockerArchive Transport = "docker-archive"
	// Docker is a registry: docker://REGISTRY/REPO[:TAG][@sha256:DIGEST].
	Docker Transport = "docker"
	// CID is an image already in the content store, named by the root of
	// its DAG.
	CID Transport = "cid"
)

// Ref is a parsed image reference.
type Ref struct {
	Transport Transport
	// Path is the layout directory or archive file (OCI, OCIArchive,
	// DockerArchive), as written: relative paths are the caller's to
	// resolve (see Abs).
	Path string
	// Tag picks an image inside a layout or archive: the
	// org.opencontainers.image.ref.name annotation for OCI and OCIArchive,
	// a repository tag such as busybox:latest for DockerArchive. Empty
	// means the only image there.
	Tag string
	// Name is the registry reference (Docker).
	Name name.Reference
	// Root is the image's DAG (CID).
	Root cid.Cid
}

// ParseRef parses an image reference in the transport syntax of skopeo and
// podman (oci:, oci-archive:, docker-archive:, docker://) or a CID. As in
// skopeo, a path ends at its first colon. A registry reference without a
// registry or tag gets Docker Hub's defaults (docker://busybox is
// index.docker.io/library/busybox:latest); only sha256 digests are
// accepted.
func ParseRef(s string) (Ref, error) {
	bad := func(format string, a ...any) (Ref, error) {
		return Ref{}, fmt.Errorf("%w: %q: %s", ErrBadRef, s, fmt.Sprintf(format, a...))
	}
	if strings.ContainsRune(s, 0) || len(s) > 4096 {
		return bad("has NUL or is over 4096 bytes")
	}
	if rest, ok := strings.CutPrefix(s, "docker://"); ok {
		n, err := name.ParseReference(rest)
		if err != nil {
			return bad("not a registry reference: %v", err)
		}
		if d, ok := n.(name.Digest); ok && !strings.HasPrefix(d.DigestStr(), "sha256:") {
			return bad("only sha256 digests are accepted")
		}
		return Ref{Transport: Docker, Name: n}, nil
	}
	transport, rest, ok := strings.Cut(s, ":")
	switch t := Transport(transport); {
	case ok && (t == OCI || t == OCIArchive || t == DockerArchive):
		path, tag, hasTag := strings.Cut(rest, ":")
		if path == "" {
			return bad("names no path")
		}
		if hasTag && (tag == "" || strings.ContainsAny(tag, " \t\r\n")) {
			return bad("has an empty or blank tag after the path")
		}
		return Ref{Transport: t, Path: path, Tag: tag}, nil
	}
	c, err := cid.Decode(s)
	if err != nil {
		return bad("want oci:PATH[:TAG], oci-archive:PATH[:TAG], docker-archive:PATH[:NAME], docker://REGISTRY/REPO[:TAG][@sha256:DIGEST] or a CID")
	}
	if c.Type() != cid.DagProtobuf {
		return bad("an image is a UnixFS directory; this CID is not dag-pb")
	}
	return Ref{Transport: CID, Root: c}, nil
}

// String gives the reference back in the syntax ParseRef reads.
func (r Ref) String() string {
	switch r.Transport {
	case Docker:
		if r.Name == nil {
			return "docker://"
		}
		return "docker://" + r.Name.String()
	case CID:
		return r.Root.String()
	default:
		s := string(r.Transport) + ":" + r.Path
		if r.Tag != "" {
			s += ":" + r.Tag
		}
		return s
	}
}

// Pinned reports whether r names exact bytes: a CID, or a registry
// reference with a digest.
func (r Ref) Pinned() bool {
	switch r.Transport {
	case CID:
		return true
	case Docker:
		_, ok := r.Name.(name.Digest)
		return ok
	}
	return false
}

// Abs makes a relative Path absolute against base, the directory the
// reference was written relative to (a declaration's folder).
func (r Ref) Abs(base string) Ref {
	if r.Path != "" && !filepath.IsAbs(r.Path) {
		r.Path = filepath.Join(base, r.Path)
	}
	return r
}
