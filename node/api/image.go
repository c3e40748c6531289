package api

import "time"

// Image is an image imported into the daemon's store (e31 image ls).
type Image struct {
	CID string `json:"cid"`
	// Ref is the reference it was imported from.
	Ref string `json:"ref"`
	// Pinned is the registry reference pinned to its digest, if it came
	// from a registry.
	Pinned   string    `json:"pinned,omitempty"`
	Digest   string    `json:"digest,omitempty"`
	Platform string    `json:"platform,omitempty"`
	Size     int64     `json:"size"`
	Layers   int       `json:"layers"`
	Created  time.Time `json:"created,omitzero"`
}

// ImageImportRequest asks the daemon to import an image: oci:PATH,
// oci-archive:PATH, docker-archive:PATH (absolute paths),
// docker://REGISTRY/REPO[:TAG] or a CID it holds.
type ImageImportRequest struct {
	Ref string `json:"ref"`
}

// ImageEvent is one line of the NDJSON stream that answers an import:
// progress, then the image or an error.
type ImageEvent struct {
	Progress *Transfer `json:"progress,omitempty"`
	Image    *Image    `json:"image,omitempty"`
	Error    string    `json:"error,omitempty"`
}
