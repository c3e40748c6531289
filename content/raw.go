package content

// Raw content, for tests that play a hostile peer.
//
// Every honest way into the store (Import, ImportTree, Fetch) makes or
// checks a whole UnixFS DAG. A hostile submitter puts on the network what
// no honest import makes: an image whose blob does not match its digest, a
// directory whose names hold "/" or "..", a file that claims a terabyte
// over one small leaf, a DAG whose children never come. PutCAR and
// PinIncomplete store and pin such DAGs as they are, so that end-to-end
// tests can serve them to providers over the real exchange. Only the
// byzantine build of e31d reaches them (node.Config.RawContent, POST
// /v1/debug/car); nothing in a default daemon calls them.

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/ipfs/go-cid"
	carv2 "github.com/ipld/go-car/v2"
)

// ErrBadCAR means what PutCAR read is not a CAR it can take.
var ErrBadCAR = errors.New("content: not a readable CAR")

// PutCAR stores every block of the CAR (v1 or v2) read from r and pins
// each of its roots for reason, whether the DAG under it is complete or
// not, and returns the roots. Each block must hash to its CID (sha2-256,
// raw or dag-pb) and a dag-pb block must decode with links the store
// accepts, as for any block held here: the store's own walks (GC, Has, the
// bulk sender) read them. Nothing else is checked: not UnixFS validity,
// not that the DAG is complete, not that a block belongs to a root. A
// failure after some blocks were written leaves them unpinned, for GC.
//
// For tests that play a hostile peer only; see the comment at the top of
// this file.
func (s *Store) PutCAR(ctx context.Context, r io.Reader, reason string) ([]cid.Cid, error) {
	if reason == "" {
		return nil, errors.New("put car: empty reason")
	}
	s.gcMu.RLock()
	defer s.gcMu.RUnlock()
	cr, err := carv2.NewBlockReader(bufio.NewReaderSize(r, streamBuffer),
		// Hashes are checked below, as for a fetch, so that a mismatch
		// is ErrInvalidData naming the block.
		carv2.WithTrustedCAR(true),
		carv2.MaxAllowedHeaderSize(1<<20),
		carv2.MaxAllowedSectionSize(maxBlockSize+maxCidLen+16),
	)
	if err != nil {
		return nil, fmt.Errorf("%w: header: %v", ErrBadCAR, err)
	}
	w := newBlockWriter(s, writerOptions{})
	n := 0
	readErr := func() error {
		for {
			if err := ctx.Err(); err != nil {
				return err
			}
			blk, err := cr.Next()
			if errors.Is(err, io.EOF) {
				return nil
			}
			if err != nil {
				return fmt.Errorf("%w: after %d blocks: %v", ErrBadCAR, n, err)
			}
			if err := verify(blk.Cid(), blk.RawData()); err != nil {
				return fmt.Errorf("block %d: %w", n, err)
			}
			if len(blk.RawData()) > maxBlockSize {
				return fmt.Errorf("%w: block %s is %d bytes, over the %d limit", ErrUnsupported, blk.Cid(), len(blk.RawData()), maxBlockSize)
			}
			if _, err := blockLinks(blk); err != nil {
				return fmt.Errorf("block %d: %w", n, err)
			}
			if err := w.put(ctx, blk); err != nil {
				return err
			}
			n++
		}
	}()
	_, _, werr := w.close(ctx)
	if readErr != nil {
		return nil, fmt.Errorf("put car: %w", readErr)
	}
	if werr != nil {
		return nil, fmt.Errorf("put car: %w", werr)
	}
	for _, root := range cr.Roots {
		if err := s.pinIncomplete(ctx, root, reason); err != nil {
			return nil, err
		}
	}
	return cr.Roots, nil
}

// PinIncomplete pins root for reason even when blocks under it are
// missing, and records the blocks it does hold as root's (the access
// index, by which the exchange serves them to a peer allowed root). It is
// the raw counterpart of Pin, whose pin promises that the data is here:
// an honest caller uses Pin. For tests that play a hostile peer only.
func (s *Store) PinIncomplete(ctx context.Context, root cid.Cid, reason string) error {
	if reason == "" {
		return errors.New("pin: empty reason")
	}
	s.gcMu.RLock()
	defer s.gcMu.RUnlock()
	return s.pinIncomplete(ctx, root, reason)
}

// pinIncomplete is PinIncomplete; the caller holds gcMu for reading.
func (s *Store) pinIncomplete(ctx context.Context, root cid.Cid, reason string) error {
	sc, err := s.scan(ctx, root)
	if err != nil {
		return fmt.Errorf("pin %s: %w", root, err)
	}
	return s.commit(root, sc.held, reason)
}
