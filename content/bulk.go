package content

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"sync/atomic"
	"time"

	"github.com/dgraph-io/badger/v4"
	"github.com/ipfs/go-cid"
	carv2 "github.com/ipld/go-car/v2"
	"github.com/ipld/go-car/v2/storage"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/protocol"
	"github.com/multiformats/go-multistream"
)

// errBulkUnsupported means the peer does not speak ProtocolBulk.
var errBulkUnsupported = errors.New("peer does not support " + ProtocolBulk)

// streamBuffer is the read and write buffer on a bulk stream: a few blocks,
// so that syscalls and yamux frames are large.
const streamBuffer = 1 << 20

// serveBulk answers one bulk request.
//
// libp2p runs it in a goroutine of its own without recovering, on what any
// peer sends: a panic fails this one request, answered statusError if
// nothing was sent yet and reset otherwise, and the daemon goes on.
func (e *Exchange) serveBulk(str network.Stream) {
	remote := str.Conn().RemotePeer()
	stop := context.AfterFunc(e.ctx, func() { _ = str.Reset() })
	defer stop()
	log := e.log.With("peer", remote)

	// wrote: a response has begun, so an error one can no longer follow.
	wrote := false
	respond := func(st bulkStatus, msg string) {
		wrote = true
		_ = str.SetWriteDeadline(time.Now().Add(e.stall))
		if _, err := str.Write(encodeResponse(bulkResponse{status: st, message: msg})); err != nil {
			_ = str.Reset()
			return
		}
		_ = str.Close()
	}
	defer func() {
		v := recover()
		if v == nil {
			return
		}
		e.recovered(PanicBulk, v, "peer", remote)
		if wrote {
			_ = str.Reset()
			return
		}
		respond(statusError, "internal error")
	}()

	_ = str.SetReadDeadline(time.Now().Add(e.stall))
	b, err := io.ReadAll(io.LimitReader(str, maxRequestBytes+1))
	if err != nil {
		log.Debug("bulk request unread", "err", err)
		_ = str.Reset()
		return
	}
	if len(b) > maxRequestBytes {
		respond(statusBadRequest, "request too large")
		return
	}
	req, err := decodeRequest(b)
	if err != nil {
		log.Info("bad bulk request", "err", err)
		respond(statusBadRequest, err.Error())
		return
	}
	log = log.With("root", req.root)
	if !e.access.Allowed(remote, req.root) {
		log.Info("bulk request refused: peer not allowed this root")
		respond(statusDenied, "not a party to a job or lease that owns "+req.root.String())
		return
	}
	list, total, err := e.s.sendList(e.ctx, req.root, req.wants, req.structure)
	switch {
	case errors.Is(err, ErrIncomplete), errors.Is(err, ErrNotFound):
		respond(statusNotFound, err.Error())
		return
	case errors.Is(err, ErrInvalidData):
		log.Error("local copy is damaged", "err", err)
		respond(statusInvalid, err.Error())
		return
	case err != nil:
		log.Warn("bulk request failed", "err", err)
		respond(statusError, "internal error")
		return
	}

	start := time.Now()
	wrote = true
	if err := e.sendCar(str, remote, req.root, list, total); err != nil {
		log.Info("bulk send failed", "blocks", len(list), "err", err)
		_ = str.Reset()
		return
	}
	_ = str.Close()
	log.Debug("bulk sent", "blocks", len(list), "bytes", total, "took", time.Since(start))
}

func (e *Exchange) sendCar(str network.Stream, to peer.ID, root cid.Cid, list []blockRef, total int64) error {
	bw := bufio.NewWriterSize(str, streamBuffer)
	_ = str.SetWriteDeadline(time.Now().Add(e.stall))
	if _, err := bw.Write(encodeResponse(bulkResponse{status: statusOK, blocks: uint64(len(list)), bytes: uint64(total)})); err != nil {
		return err
	}
	car, err := storage.NewWritable(bw, []cid.Cid{root}, carv2.WriteAsCarV1(true))
	if err != nil {
		return err
	}
	for _, ref := range list {
		if e.upload != nil {
			if err := e.upload.WaitN(e.ctx, ref.size); err != nil {
				return err
			}
		}
		// A deadline per block: a receiver that stops reading for the
		// stall timeout is dropped.
		_ = str.SetWriteDeadline(time.Now().Add(e.stall))
		// Unverified read: the receiver hashes every block, so
		// hashing here too would double the CPU spent on hashes for
		// no extra safety. A damaged block still fails the transfer,
		// at the receiver, as ErrInvalidData.
		err := e.s.viewRef(ref, func(data []byte) error {
			if err := car.Put(e.ctx, ref.c.KeyString(), data); err != nil {
				return err
			}
			if e.served != nil {
				e.served(to, int64(len(data)))
			}
			return nil
		})
		if err != nil {
			return err
		}
	}
	return bw.Flush()
}

// sendList returns the blocks to send for a bulk request, depth-first, each
// once, with where each is stored, and their total size: every wanted
// subtree found inside root's DAG, whole, or only its dag-pb nodes if
// structure is set. Wants outside the DAG are ignored, so a peer allowed one
// root cannot use it to read blocks of another. Only dag-pb nodes are read
// while planning, all in one read transaction.
func (s *Store) sendList(ctx context.Context, root cid.Cid, wants []cid.Cid, structure bool) ([]blockRef, int64, error) {
	wanted := make(map[cid.Cid]struct{}, len(wants))
	for _, c := range wants {
		wanted[c] = struct{}{}
	}
	type item struct {
		c      cid.Cid
		inside bool // within a wanted subtree
	}
	var (
		list  []blockRef
		total int64
		sent  = map[cid.Cid]struct{}{}
		seen  = map[cid.Cid]struct{}{} // walked through without sending
		stack = []item{{c: root}}
	)
	// Taken before the transaction: a pack freed after it is seen by
	// every read of a place the transaction gives (viewPacked).
	gen := s.packs.generation()
	err := s.db.View(func(txn *badger.Txn) error {
		for len(stack) > 0 {
			if err := ctx.Err(); err != nil {
				return err
			}
			it := stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			c := it.c
			if _, ok := wanted[c]; ok {
				it.inside = true
			}
			if _, ok := sent[c]; ok {
				continue
			}
			if c.Type() == cid.Raw && (!it.inside || structure) {
				continue // not to be sent, and has no children that could be
			}
			if !it.inside {
				if _, ok := seen[c]; ok {
					continue
				}
				seen[c] = struct{}{}
			}
			size, loc, held, err := sizeRecord(txn, c)
			if err != nil {
				return err
			}
			if !held {
				return fmt.Errorf("%w: this node lacks block %s of %s", ErrIncomplete, c, root)
			}
			ref := blockRef{c: c, size: size, loc: loc, gen: gen}
			if it.inside {
				sent[c] = struct{}{}
				list = append(list, ref)
				total += int64(size)
			}
			if c.Type() != cid.DagProtobuf {
				continue
			}
			b, err := s.getRef(txn, ref)
			if err != nil {
				return err
			}
			links, err := blockLinks(b)
			if err != nil {
				return err
			}
			for i := len(links) - 1; i >= 0; i-- {
				stack = append(stack, item{c: links[i].Cid, inside: it.inside})
			}
		}
		return nil
	})
	if err != nil {
		return nil, 0, err
	}
	return list, total, nil
}

// fetchBulk fetches the missing subtrees of root from peer from. If any
// missing subtree has structure (dag-pb nodes), that structure comes first,
// so the leaves already held are known and not asked for; then the missing
// leaves, at most maxWants per stream.
func (e *Exchange) fetchBulk(ctx context.Context, from peer.ID, root cid.Cid, missing []cid.Cid, maxBytes int64, p Progress) (transfer, error) {
	var t transfer
	estimate := int64(0)
	if slices.ContainsFunc(missing, func(c cid.Cid) bool { return c.Type() == cid.DagProtobuf }) {
		n, err := e.bulkRound(ctx, from, bulkRequest{structure: true, root: root, wants: missing}, maxBytes, nil)
		t.blocks += n.blocks
		t.bytes += n.bytes
		if err != nil {
			return t, err
		}
		sc, err := e.s.scan(ctx, root)
		if err != nil {
			return t, err
		}
		missing, estimate = sc.missing, sc.missingBytes
	}
	if len(missing) == 0 {
		return t, nil
	}
	progressStart(p, estimate, fmt.Sprintf("fetch %s from %s", root, from))
	defer progressDone(p)
	for len(missing) > 0 {
		wants := missing[:min(len(missing), maxWants)]
		missing = missing[len(wants):]
		left := int64(0)
		if maxBytes > 0 {
			left = max(maxBytes-t.bytes, 1)
		}
		n, err := e.bulkRound(ctx, from, bulkRequest{root: root, wants: wants}, left, p)
		t.blocks += n.blocks
		t.bytes += n.bytes
		if err != nil {
			return t, err
		}
	}
	return t, nil
}

// bulkRound sends one request over a new stream and writes what arrives,
// refusing to take more than maxBytes (0: no cap).
func (e *Exchange) bulkRound(ctx context.Context, from peer.ID, req bulkRequest, maxBytes int64, p Progress) (transfer, error) {
	var t transfer
	str, err := e.h.NewStream(ctx, from, ProtocolBulk)
	if err != nil {
		if errors.Is(err, multistream.ErrNotSupported[protocol.ID]{}) {
			return t, fmt.Errorf("%w: %v", errBulkUnsupported, err)
		}
		return t, fmt.Errorf("open stream: %w", err)
	}
	ok := false
	defer func() {
		if !ok {
			_ = str.Reset()
		}
	}()

	// One watchdog covers both a cancelled context and a stall: either
	// resets the stream, which ends any read in progress.
	var stalled atomic.Bool
	watchdog := time.AfterFunc(e.stall, func() {
		stalled.Store(true)
		_ = str.Reset()
	})
	defer watchdog.Stop()
	stop := context.AfterFunc(ctx, func() { _ = str.Reset() })
	defer stop()
	why := func(err error) error {
		switch {
		case ctx.Err() != nil:
			return ctx.Err()
		case stalled.Load():
			return fmt.Errorf("%w: no block from %s for %s", ErrStalled, from, e.stall)
		}
		return err
	}

	if _, err := str.Write(encodeRequest(req)); err != nil {
		return t, why(fmt.Errorf("send request: %w", err))
	}
	if err := str.CloseWrite(); err != nil {
		return t, why(fmt.Errorf("send request: %w", err))
	}
	br := bufio.NewReaderSize(str, streamBuffer)
	resp, err := readResponse(br)
	if err != nil {
		return t, why(fmt.Errorf("read response: %w", err))
	}
	switch resp.status {
	case statusOK:
	case statusDenied:
		return t, fmt.Errorf("%w: %s", ErrDenied, resp.message)
	case statusNotFound:
		return t, fmt.Errorf("%w: peer says: %s", ErrNotFound, resp.message)
	case statusInvalid:
		return t, fmt.Errorf("%w: peer's copy is damaged: %s", ErrInvalidData, resp.message)
	default:
		return t, fmt.Errorf("peer refused (status %d): %s", resp.status, resp.message)
	}
	if maxBytes > 0 && resp.bytes > uint64(maxBytes) {
		return t, fmt.Errorf("%w: the peer would send %d bytes, over the cap of %d bytes", ErrTooLarge, resp.bytes, maxBytes)
	}

	cr, err := carv2.NewBlockReader(br,
		// Hashes are checked below, where a mismatch can be reported
		// as ErrInvalidData naming the block.
		carv2.WithTrustedCAR(true),
		carv2.MaxAllowedHeaderSize(4<<10),
		carv2.MaxAllowedSectionSize(maxBlockSize+maxCidLen+16),
	)
	if err != nil {
		return t, why(fmt.Errorf("read CAR header: %w", err))
	}
	if len(cr.Roots) != 1 || cr.Roots[0] != req.root {
		return t, fmt.Errorf("%w: CAR stream has roots %v, want %s", errMalformed, cr.Roots, req.root)
	}

	w := newBlockWriter(e.s, writerOptions{verify: true})
	// Every block must be a want or a link of a block already received
	// (the sender goes depth-first), so a peer cannot fill the store with
	// blocks that are not part of the DAG.
	expected := make(map[cid.Cid]struct{}, len(req.wants))
	for _, c := range req.wants {
		expected[c] = struct{}{}
	}
	recvErr := func() error {
		for {
			blk, err := cr.Next()
			if errors.Is(err, io.EOF) {
				return nil
			}
			if err != nil {
				return why(fmt.Errorf("stream ended after %d of %d blocks: %w", t.blocks, resp.blocks, err))
			}
			watchdog.Reset(e.stall)
			c := blk.Cid()
			if _, ok := expected[c]; !ok {
				return fmt.Errorf("%w: unexpected block %s", errMalformed, c)
			}
			delete(expected, c)
			if req.structure && c.Type() != cid.DagProtobuf {
				return fmt.Errorf("%w: leaf %s in a structure-only reply", errMalformed, c)
			}
			if c.Type() == cid.DagProtobuf {
				// Nodes are checked before their links are trusted;
				// leaves are hashed by the writer, in parallel.
				if err := verify(c, blk.RawData()); err != nil {
					return err
				}
			}
			links, err := blockLinks(blk)
			if err != nil {
				return err
			}
			for _, l := range links {
				expected[l.Cid] = struct{}{}
			}
			t.blocks++
			t.bytes += int64(len(blk.RawData()))
			if uint64(t.blocks) > resp.blocks || uint64(t.bytes) > resp.bytes {
				return fmt.Errorf("%w: more than the %d blocks, %d bytes announced", errMalformed, resp.blocks, resp.bytes)
			}
			if err := w.put(ctx, blk); err != nil {
				return err
			}
			progressAdd(p, int64(len(blk.RawData())))
		}
	}()
	_, _, werr := w.close(ctx)
	if recvErr != nil {
		return t, recvErr
	}
	if werr != nil {
		return t, werr
	}
	if uint64(t.blocks) != resp.blocks {
		return t, fmt.Errorf("stream ended after %d of %d blocks", t.blocks, resp.blocks)
	}
	ok = true
	_ = str.Close()
	return t, nil
}
