package image

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/e31network/e31/content"
	"github.com/ipfs/go-cid"
)

// The list of imported images is the store's pins: Import pins each root
// with PinReason(ref), so the pins with PinPrefix are the images, and the
// rest of a Record is read back from the DAG. There is no second index to
// keep in step with the pins.

// List returns a Record for every image pinned by Import, ordered by CID
// bytes. An image imported under several references is listed once, with
// the first of them (by pin order) as Ref. A pinned image that does not
// load (damaged blocks) is listed with its CID and Ref only.
func List(ctx context.Context, store *content.Store) ([]Record, error) {
	pins, err := store.Pins(ctx)
	if err != nil {
		return nil, fmt.Errorf("list images: %w", err)
	}
	var out []Record
	for _, p := range pins {
		ref, ok := imageRef(p.Reasons)
		if !ok {
			continue
		}
		im, err := Load(ctx, store, p.Root)
		if err != nil {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			out = append(out, Record{CID: p.Root, Ref: ref})
			continue
		}
		out = append(out, im.record(ref, pinnedName(ref, im.Digest.String())))
	}
	return out, nil
}

// pinnedName is the digest-pinned form of a docker:// reference, or ""
// for other references.
func pinnedName(ref, digest string) string {
	r, err := ParseRef(ref)
	if err != nil || r.Transport != Docker {
		return ""
	}
	return "docker://" + r.Name.Context().Digest(digest).String()
}

func imageRef(reasons []string) (string, bool) {
	for _, r := range reasons {
		if ref, ok := strings.CutPrefix(r, PinPrefix); ok {
			return ref, true
		}
	}
	return "", false
}

// Remove drops every pin Import made on root. The blocks stay until the
// store's GC, and stay for good if a job's pin still holds them. It
// returns ErrNotFound if root carries no image pin.
func Remove(ctx context.Context, store *content.Store, root cid.Cid) error {
	pins, err := store.Pins(ctx)
	if err != nil {
		return fmt.Errorf("remove image %s: %w", root, err)
	}
	removed := 0
	for _, p := range pins {
		if p.Root != root {
			continue
		}
		for _, r := range p.Reasons {
			if !strings.HasPrefix(r, PinPrefix) {
				continue
			}
			if err := store.Unpin(ctx, root, r); err != nil && !errors.Is(err, content.ErrNotFound) {
				return fmt.Errorf("remove image %s: %w", root, err)
			}
			removed++
		}
	}
	if removed == 0 {
		return fmt.Errorf("remove image %s: %w", root, ErrNotFound)
	}
	return nil
}
