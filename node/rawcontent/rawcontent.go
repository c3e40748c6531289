//go:build byzantine

package rawcontent

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"

	"github.com/e31network/e31/content"
	"github.com/e31network/e31/content/image"
	"github.com/e31network/e31/node/submitter"
	"github.com/ipfs/go-cid"
)

// Pin is the pin reason of every root posted to POST /v1/debug/car.
const Pin = "debug car"

// PutCAR stores a posted CAR as it is, its roots pinned under Pin
// (apiserver.Config.PutCAR).
func PutCAR(ctx context.Context, s *content.Store, log *slog.Logger, car io.Reader) ([]cid.Cid, error) {
	roots, err := s.PutCAR(ctx, car, Pin)
	if err != nil {
		return nil, err
	}
	log.Warn("raw content: stored a CAR unchecked, as a hostile submitter would", "roots", len(roots))
	return roots, nil
}

// Store is s with a Pin that pins a debug CAR's root for a job even when
// its DAG is incomplete.
func Store(s *content.Store) submitter.Store { return rawStore{s} }

// Images is lib with an Import that takes a debug CAR's root, held in s, as
// an image without loading it.
func Images(lib submitter.Images, s *content.Store) submitter.Images {
	return rawImages{Images: lib, store: s}
}

// rawStore is the node's store (every method of content.Store, so that
// the submitter's optional interfaces still hold) with a Pin that takes a
// debug CAR's incomplete DAG.
type rawStore struct{ *content.Store }

func (s rawStore) Pin(ctx context.Context, root cid.Cid, reason string) error {
	err := s.Store.Pin(ctx, root, reason)
	if !errors.Is(err, content.ErrIncomplete) {
		return err
	}
	raw, perr := postedRaw(ctx, s.Store, root)
	if perr != nil || !raw {
		return errors.Join(err, perr)
	}
	return s.Store.PinIncomplete(ctx, root, reason)
}

// rawImages is the node's image library with an Import that names a debug
// CAR's root as it is when it is not an image the library can load.
type rawImages struct {
	submitter.Images
	store *content.Store
}

func (l rawImages) Import(ctx context.Context, ref string, progress content.Progress) (image.Record, error) {
	rec, err := l.Images.Import(ctx, ref, progress)
	if err == nil {
		return rec, nil
	}
	c, cerr := cid.Decode(ref)
	if cerr != nil {
		return rec, err
	}
	raw, perr := postedRaw(ctx, l.store, c)
	if perr != nil || !raw {
		return rec, errors.Join(err, perr)
	}
	// No Entrypoint or Cmd is known: the declaration must bring a
	// command, as the submitter checks.
	return image.Record{CID: c, Ref: ref}, nil
}

// postedRaw reports whether root came in through POST /v1/debug/car.
func postedRaw(ctx context.Context, s *content.Store, root cid.Cid) (bool, error) {
	pins, err := s.Pins(ctx)
	if err != nil {
		return false, fmt.Errorf("raw content: %w", err)
	}
	for _, p := range pins {
		if p.Root != root {
			continue
		}
		for _, r := range p.Reasons {
			if r == Pin {
				return true, nil
			}
		}
	}
	return false, nil
}
