package content

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"time"

	blocks "github.com/ipfs/go-block-format"
	"github.com/ipfs/go-cid"
	ipld "github.com/ipfs/go-ipld-format"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	mh "github.com/multiformats/go-multihash"
)

// bitswapWantBatch bounds how many blocks one bitswap request asks for, and
// so how much bitswap can hold in memory ahead of our writes.
const bitswapWantBatch = 256

// fetchBitswap fetches the missing subtrees of root over bitswap, a level
// at a time: the children of each received node that are not held locally
// form the next wants.
func (e *Exchange) fetchBitswap(ctx context.Context, from peer.ID, root cid.Cid, missing []cid.Cid, maxBytes int64, p Progress) (transfer, error) {
	var t transfer
	if e.h.Network().Connectedness(from) != network.Connected {
		if err := e.h.Connect(ctx, peer.AddrInfo{ID: from}); err != nil {
			return t, fmt.Errorf("connect: %w", err)
		}
	}
	errStall := fmt.Errorf("%w: no block from %s for %s", ErrStalled, from, e.stall)
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	watchdog := time.AfterFunc(e.stall, func() { cancel(errStall) })
	defer watchdog.Stop()

	progressStart(p, 0, fmt.Sprintf("fetch %s from %s", root, from))
	defer progressDone(p)
	sess := e.bs.NewSession(ctx)
	w := newBlockWriter(e.s, writerOptions{})
	queued := map[cid.Cid]struct{}{}
	frontier := make([]cid.Cid, 0, len(missing))
	enqueue := func(c cid.Cid) error {
		if _, ok := queued[c]; ok {
			return nil
		}
		queued[c] = struct{}{}
		if isEmptyBlock(c) {
			// Bitswap servers treat a zero-length block as absent;
			// its content is known anyway.
			blk, err := blocks.NewBlockWithCid(nil, c)
			if err != nil {
				return err
			}
			return w.put(ctx, blk)
		}
		frontier = append(frontier, c)
		return nil
	}
	recvErr := func() error {
		for _, c := range missing {
			if err := enqueue(c); err != nil {
				return err
			}
		}
		for len(frontier) > 0 {
			n := min(len(frontier), bitswapWantBatch)
			batch := frontier[:n]
			frontier = frontier[n:]
			want := make(map[cid.Cid]struct{}, n)
			for _, c := range batch {
				want[c] = struct{}{}
			}
			ch, err := sess.GetBlocks(ctx, batch)
			if err != nil {
				return err
			}
			for blk := range ch {
				c := blk.Cid()
				if _, ok := want[c]; !ok {
					continue
				}
				watchdog.Reset(e.stall)
				delete(want, c)
				if err := verify(c, blk.RawData()); err != nil {
					return err
				}
				links, err := blockLinks(blk)
				if err != nil {
					return err
				}
				for _, l := range links {
					if err := e.queueMissing(ctx, l.Cid, enqueue); err != nil {
						return err
					}
				}
				t.blocks++
				t.bytes += int64(len(blk.RawData()))
				if maxBytes > 0 && t.bytes > maxBytes {
					return fmt.Errorf("%w: more than the cap of %d bytes", ErrTooLarge, maxBytes)
				}
				if err := w.put(ctx, blk); err != nil {
					return err
				}
				progressAdd(p, int64(len(blk.RawData())))
			}
			if len(want) > 0 {
				if cause := context.Cause(ctx); cause != nil {
					return cause
				}
				return fmt.Errorf("bitswap ended with %d blocks not received", len(want))
			}
		}
		return nil
	}()
	_, _, werr := w.close(context.WithoutCancel(ctx))
	if recvErr != nil {
		return t, recvErr
	}
	return t, werr
}

// queueMissing queues c if it is not held, or the missing parts below it if
// it is (a subtree shared with a DAG held before).
func (e *Exchange) queueMissing(ctx context.Context, c cid.Cid, enqueue func(cid.Cid) error) error {
	held, err := e.s.has(c)
	if err != nil {
		return err
	}
	if !held {
		return enqueue(c)
	}
	if c.Type() != cid.DagProtobuf {
		return nil
	}
	sc, err := e.s.scan(ctx, c)
	if err != nil {
		return err
	}
	for _, m := range sc.missing {
		if err := enqueue(m); err != nil {
			return err
		}
	}
	return nil
}

// isEmptyBlock reports whether c is the raw block of zero bytes.
func isEmptyBlock(c cid.Cid) bool {
	if c.Type() != cid.Raw {
		return false
	}
	empty, err := mh.Sum(nil, mh.SHA2_256, -1)
	return err == nil && bytes.Equal(c.Hash(), empty)
}

// bitswapStore is the store as bitswap sees it: reads are verified, so a
// damaged block is never served; writes are verified, since they come from
// the network.
type bitswapStore struct{ s *Store }

func (b bitswapStore) Get(_ context.Context, c cid.Cid) (blocks.Block, error) {
	blk, err := b.s.getBlock(c)
	if errors.Is(err, ErrNotFound) {
		return nil, ipld.ErrNotFound{Cid: c}
	}
	return blk, err
}

func (b bitswapStore) Has(_ context.Context, c cid.Cid) (bool, error) {
	return b.s.has(c)
}

func (b bitswapStore) GetSize(_ context.Context, c cid.Cid) (int, error) {
	n, ok, err := b.s.blockSize(c)
	if err != nil {
		return 0, err
	}
	if !ok {
		return 0, ipld.ErrNotFound{Cid: c}
	}
	return n, nil
}

func (b bitswapStore) Put(ctx context.Context, blk blocks.Block) error {
	return b.PutMany(ctx, []blocks.Block{blk})
}

func (b bitswapStore) PutMany(_ context.Context, bs []blocks.Block) error {
	for _, blk := range bs {
		if err := verify(blk.Cid(), blk.RawData()); err != nil {
			return err
		}
	}
	_, _, err := b.s.putBlocks(bs)
	return err
}

// DeleteBlock is refused: blocks leave the store only through GC, which
// knows what is pinned.
func (b bitswapStore) DeleteBlock(context.Context, cid.Cid) error {
	return errors.New("content: blocks are deleted only by GC")
}

// AllKeysChan lists held blocks as raw CIDs, since blocks are keyed by
// multihash alone.
func (b bitswapStore) AllKeysChan(ctx context.Context) (<-chan cid.Cid, error) {
	out := make(chan cid.Cid)
	go func() {
		defer close(out)
		_ = b.s.scanPrefix(ctx, []byte{kindSize, '/'}, func(k []byte) error {
			select {
			case out <- cid.NewCidV1(cid.Raw, k[2:]):
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
		})
	}()
	return out, nil
}
