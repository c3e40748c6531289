package market

import (
	"regexp"
	"strings"
	"unicode"
)

// The job's software: work.image and work.image_ref.
//
// A person writes work.image in the transport syntax of podman and skopeo:
//
//	oci:PATH[:TAG]               an OCI image layout directory
//	oci-archive:PATH[:TAG]       its tar (podman save --format oci-archive)
//	docker-archive:PATH[:NAME]   a docker save tarball
//	docker://REGISTRY/REPO[:TAG][@sha256:DIGEST]
//	CID                          an image already imported (e31 image import)
//
// PATH ends at the first colon, as in skopeo. At submit the node imports
// the image and rewrites work.image to the CID of the image's DAG, so the
// signed declaration names exact bytes; for docker:// it also sets
// work.image_ref to the registry reference pinned to the manifest digest
// (docker://REGISTRY/REPO@sha256:…), which lets a provider that pulls from
// registries get the same bytes there. A broadcast declaration therefore
// has work.image empty or a CID; Validate accepts every form because it
// also checks the file a person wrote, and the node refuses anything but a
// CID on the wire. Only the shape is checked here: whether the path exists
// or the registry answers is for the node.

// Image transports, as the prefix of work.image.
const (
	ImageOCI           = "oci:"
	ImageOCIArchive    = "oci-archive:"
	ImageDockerArchive = "docker-archive:"
	ImageDocker        = "docker://"
)

// MaxImageLen bounds work.image and work.image_ref.
const MaxImageLen = 4096

var (
	// dockerRefRe is the shape of a registry reference, after the
	// distribution project's grammar: an optional host[:port]/, path
	// components of lower-case letters and digits joined by ".", "_",
	// "__" or dashes, then an optional tag and an optional sha256 digest.
	// The first component may be a host; the grammar does not need to
	// tell, since both shapes are accepted.
	dockerRefRe = regexp.MustCompile(`^` +
		`(?:(?:[a-zA-Z0-9](?:[a-zA-Z0-9-]*[a-zA-Z0-9])?(?:\.[a-zA-Z0-9](?:[a-zA-Z0-9-]*[a-zA-Z0-9])?)*|\[[0-9a-fA-F:]+\])(?::[0-9]+)?/)?` +
		`[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*(?:/[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*)*` +
		`(?::[a-zA-Z0-9_][a-zA-Z0-9_.-]{0,127})?` +
		`(?:@sha256:[0-9a-f]{64})?$`)
	pinnedRe = regexp.MustCompile(`@sha256:[0-9a-f]{64}$`)
)

func validateImage(w *Work, ps *problems) {
	if w.Image != "" {
		validateImageSource("work.image", w.Image, ps)
	}
	switch {
	case w.ImageSize == 0:
	case w.ImageSize > MaxInputSize:
		ps.add("work.image_size", "must be at most %s", Size(MaxInputSize))
	case !IsCID(w.Image):
		ps.add("work.image_size", "is set at submit, with work.image rewritten to a CID; leave it out")
	}
	if w.ImageRef == "" {
		return
	}
	const f = "work.image_ref"
	switch {
	case w.Image == "":
		ps.add(f, "needs work.image")
	case !IsCID(w.Image):
		ps.add(f, "is set at submit, with work.image rewritten to a CID; leave it out")
	case len(w.ImageRef) > MaxImageLen:
		ps.add(f, "must be at most %d bytes long", MaxImageLen)
	case !strings.HasPrefix(w.ImageRef, ImageDocker) || !dockerRefRe.MatchString(strings.TrimPrefix(w.ImageRef, ImageDocker)):
		ps.add(f, "must be a registry reference such as docker://registry.example/repo@sha256:<64 hex digits>")
	case !pinnedRe.MatchString(w.ImageRef):
		ps.add(f, "must be pinned to a digest: docker://REGISTRY/REPO@sha256:<64 hex digits>")
	}
}

// validateImageSource checks the shape of one work.image value.
func validateImageSource(f, s string, ps *problems) {
	if !validateText(f, s, ps) {
		return
	}
	if len(s) > MaxImageLen {
		ps.add(f, "must be at most %d bytes long", MaxImageLen)
		return
	}
	if IsCID(s) {
		return
	}
	const want = "must be oci:PATH[:TAG], oci-archive:PATH[:TAG], docker-archive:PATH, docker://REGISTRY/REPO[:TAG][@sha256:DIGEST] or the CID of an imported image"
	switch {
	case strings.HasPrefix(s, ImageDocker):
		if !dockerRefRe.MatchString(strings.TrimPrefix(s, ImageDocker)) {
			ps.add(f, "is not a registry reference: want docker://REGISTRY/REPO[:TAG][@sha256:<64 hex digits>], with a lower-case repository")
		}
	case strings.HasPrefix(s, ImageOCI), strings.HasPrefix(s, ImageOCIArchive), strings.HasPrefix(s, ImageDockerArchive):
		_, rest, _ := strings.Cut(s, ":")
		path, tag, hasTag := strings.Cut(rest, ":")
		if path == "" {
			ps.add(f, "names no path: want %sPATH", s[:len(s)-len(rest)])
			return
		}
		if hasTag && (tag == "" || strings.ContainsFunc(tag, func(r rune) bool { return unicode.IsSpace(r) || !unicode.IsPrint(r) })) {
			ps.add(f, "has an empty or unprintable tag after the path")
		}
	default:
		ps.add(f, "%s", want)
	}
}
