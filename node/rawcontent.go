package node

// A hostile submitter, for tests (Config.RawContent).
//
// A real attacker runs a modified daemon and puts on the network DAGs that
// no honest import makes. The byzantine build of e31d plays one with
// --misbehave raw-content: POST /v1/debug/car stores a CAR's blocks as
// they are and pins its roots under rawCARPin, complete or not
// (content.Store.PutCAR), and the submitter is handed a store and an image
// library that take such a root where the honest ones would refuse it: an
// incomplete DAG is pinned for a job anyway, and a work.image CID that is
// no valid image is named in the declaration as it is. The submitter's own
// code is unchanged; only what it is wired to differs, and only for roots
// that came in through the debug CAR, so the rest of the node behaves.

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/e31network/e31/content"
	"github.com/e31network/e31/content/image"
	"github.com/e31network/e31/node/submitter"
	"github.com/ipfs/go-cid"
)

// rawCARPin is the pin reason of every root posted to POST /v1/debug/car.
const rawCARPin = "debug car"

// putRawCAR stores a posted CAR as it is (apiserver.Config.PutCAR).
func (n *Node) putRawCAR(ctx context.Context, car io.Reader) ([]cid.Cid, error) {
	roots, err := n.store.PutCAR(ctx, car, rawCARPin)
	if err != nil {
		return nil, err
	}
	n.log.Warn("raw content: stored a CAR unchecked, as a hostile submitter would", "roots", len(roots))
	return roots, nil
}

// submitterStore is the store the submitter works through: the node's own,
// or with RawContent one that pins a debug CAR's root for a job even when
// its DAG is incomplete.
func (n *Node) submitterStore() submitter.Store {
	if !n.cfg.RawContent {
		return n.store
	}
	return rawStore{n.store}
}

// submitterImages is the image library the submitter imports work.image
// with: the node's own, or with RawContent one that takes a debug CAR's
// root as an image without loading it.
func (n *Node) submitterImages() submitter.Images {
	if !n.cfg.RawContent {
		return n.images
	}
	return rawImages{Images: n.images, store: n.store}
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
			if r == rawCARPin {
				return true, nil
			}
		}
	}
	return false, nil
}
