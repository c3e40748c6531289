package images

import (
	"errors"

	"github.com/e31network/e31/content/image"
	"github.com/e31network/e31/exec/layers"
)

// Refused reports whether err, from Prepare or Pull, says that the image
// itself was refused: a layer that is hostile, malformed or over a cap, a
// blob that does not match its digest, files of the image that are not a
// valid image. Such an image fails the same way on every provider. Errors
// of this node (a full disk, a closed cache, a store that failed) are not
// refusals.
func Refused(err error) bool {
	for _, target := range []error{
		layers.ErrUnsafePath, layers.ErrBadLink, layers.ErrTooLarge, layers.ErrBadOwner,
		layers.ErrUnsupported, layers.ErrMalformed, layers.ErrMediaType,
		layers.ErrDigestMismatch, layers.ErrBadDigest,
		image.ErrDigestMismatch, image.ErrInvalid, image.ErrNoPlatform,
	} {
		if errors.Is(err, target) {
			return true
		}
	}
	return false
}
