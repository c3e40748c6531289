package image

import "errors"

// Sentinel errors that callers branch on; functions wrap them with the
// details.
var (
	// ErrBadRef means an image reference is not in any form ParseRef
	// accepts.
	ErrBadRef = errors.New("image: bad reference")

	// ErrDigestMismatch means a blob's bytes (or their number) do not
	// match the digest and size that name them: the source is damaged or
	// lying. Nothing of that import is pinned.
	ErrDigestMismatch = errors.New("image: blob does not match its digest")

	// ErrNoPlatform means the image has no manifest for the platform
	// wanted; the message names the platforms it has.
	ErrNoPlatform = errors.New("image: no manifest for this platform")

	// ErrNotPinned means a registry reference carries no digest where one
	// is required (Pull).
	ErrNotPinned = errors.New("image: reference is not pinned to a digest")

	// ErrInvalid means the image's own files (index, manifest, config, the
	// DAG's layout) are malformed or use something refused on purpose: a
	// digest other than sha256, a foreign layer, too many layers.
	ErrInvalid = errors.New("image: invalid image")

	// ErrNotFound means the layout, archive or store has no image by
	// that tag or CID.
	ErrNotFound = errors.New("image: not found")

	// ErrAmbiguous means a layout or archive holds several images and the
	// reference does not say which.
	ErrAmbiguous = errors.New("image: several images match")
)
