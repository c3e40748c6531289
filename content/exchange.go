package content

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"sync"
	"time"

	"github.com/ipfs/boxo/bitswap"
	"github.com/ipfs/boxo/bitswap/network/bsnet"
	"github.com/ipfs/go-cid"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/peer"
	"golang.org/x/time/rate"
)

// ProtocolBulk is the libp2p protocol of the bulk (CAR stream) transfer.
const ProtocolBulk = "/e31/content/car/1"

// DefaultStallTimeout is how long a transfer may go without a block before
// it is abandoned.
const DefaultStallTimeout = 60 * time.Second

// Access decides who may fetch what: a node allows a peer a root when the
// peer is a party to a job or lease that owns it. It is asked for every
// bulk request and, through the block index, for every bitswap want, so it
// should answer from memory.
type Access interface {
	Allowed(p peer.ID, root cid.Cid) bool
}

// AccessFunc adapts a function to Access.
type AccessFunc func(p peer.ID, root cid.Cid) bool

// Allowed calls f.
func (f AccessFunc) Allowed(p peer.ID, root cid.Cid) bool { return f(p, root) }

// ExchangeOptions configures NewExchange. The zero value is usable.
type ExchangeOptions struct {
	// Log receives refusals and transfer failures; nil discards them.
	Log *slog.Logger
	// StallTimeout fails a transfer after this long without a block.
	// 0 means DefaultStallTimeout.
	StallTimeout time.Duration
	// UploadLimit caps, in bytes per second, what the bulk protocol
	// serves to all peers together, so that a node on a thin uplink can
	// bound what its data costs it. 0 means no limit. Bitswap, the
	// fallback for peers without the bulk protocol, is not limited.
	UploadLimit int64
	// Served, if set, is told of every block served over the bulk
	// protocol, with the peer it went to: the node counts what it serves
	// by kind of peer.
	Served func(to peer.ID, bytes int64)
	// Panicked, if set, is told of every panic recovered while serving a
	// peer (where PanicBulk or PanicBitswap); the node counts them. Nil:
	// they are only logged, at error level on Log.
	Panicked func(where string)
}

// Where a panic was recovered while serving a peer (ExchangeOptions.Panicked).
const (
	// PanicBulk: answering one bulk request, which fails.
	PanicBulk = "bulk"
	// PanicBitswap: deciding whether a bitswap want may be served; the
	// block is refused.
	PanicBitswap = "bitswap"
)

// FetchOptions configures one fetch. The zero value fetches without
// pinning.
type FetchOptions struct {
	// Pin, if not empty, pins the root with this reason once the whole
	// DAG is held, never before.
	Pin string
	// MaxBytes, if not 0, fails the fetch with ErrTooLarge rather than
	// take more than this many bytes over the network; on the bulk path
	// the peer announces its total first, so an oversized DAG is refused
	// before its data moves.
	MaxBytes int64
	// Progress receives the bytes of blocks as they arrive (on the bulk
	// path, of leaves only: the structure before them is small). On the
	// bulk path its total is the DAG's own statement of what is missing
	// (0 if unknown); on bitswap it is 0.
	Progress Progress
	// Fallback names sources FetchFrom turns to only once every source it
	// was given has failed or refused: a peer whose uplink is the scarce
	// one, such as a submitter whose data other providers already hold.
	Fallback []peer.ID
}

// FetchStats describes one fetch.
type FetchStats struct {
	Blocks        int           // blocks in the DAG
	BlocksFetched int           // blocks that came over the network
	Bytes         int64         // bytes in the DAG
	BytesFetched  int64         // bytes that came over the network
	Duration      time.Duration // wall time of the fetch
	Method        string        // "local" (nothing missing), "bulk" or "bitswap"
	// Sources is what each source sent, in the order given to FetchFrom;
	// empty for Fetch and FetchBitswap.
	Sources []SourceStats
}

// Exchange moves DAGs between peers over a libp2p host: it serves the bulk
// protocol and bitswap from its Store to peers Access allows, and fetches
// from them.
type Exchange struct {
	// Immutable after NewExchange.
	h      host.Host
	s      *Store
	access Access
	log    *slog.Logger
	stall  time.Duration
	bs     *bitswap.Bitswap
	upload *rate.Limiter // nil: no limit
	served func(to peer.ID, bytes int64)
	// panicked is told of panics recovered while serving; nil: logged only.
	panicked func(where string)
	ctx      context.Context // cancelled by Close; bounds serving
	cancel   context.CancelFunc

	closeOnce sync.Once
}

// NewExchange starts serving s on h (bulk protocol and bitswap) to the
// peers access allows. It runs until Close or until ctx is cancelled.
func NewExchange(ctx context.Context, h host.Host, s *Store, access Access, o ExchangeOptions) (*Exchange, error) {
	if h == nil || s == nil || access == nil {
		return nil, errors.New("content: NewExchange needs a host, a store and an access policy")
	}
	log := o.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	stall := o.StallTimeout
	if stall <= 0 {
		stall = DefaultStallTimeout
	}
	ectx, cancel := context.WithCancel(ctx)
	e := &Exchange{
		h:        h,
		s:        s,
		access:   access,
		log:      log,
		stall:    stall,
		ctx:      ectx,
		cancel:   cancel,
		served:   o.Served,
		panicked: o.Panicked,
	}
	if o.UploadLimit > 0 {
		// The burst must hold the largest block; a tenth of a second of
		// the rate lets a fast limit send in large writes.
		e.upload = rate.NewLimiter(rate.Limit(o.UploadLimit), int(max(2*maxBlockSize, o.UploadLimit/10)))
	}
	e.bs = bitswap.New(ectx, bsnet.NewFromIpfsHost(h), nil, bitswapStore{s},
		bitswap.WithPeerBlockRequestFilter(e.allowBlock),
		// Tell a refused or unlucky peer at once rather than let it wait
		// for a block that will not come.
		bitswap.SetSendDontHaves(true),
	)
	h.SetStreamHandler(ProtocolBulk, e.serveBulk)
	return e, nil
}

// Close stops serving and cancels transfers in progress. It does not close
// the host or the store.
func (e *Exchange) Close() error {
	e.closeOnce.Do(func() {
		e.h.RemoveStreamHandler(ProtocolBulk)
		e.cancel()
		_ = e.bs.Close()
	})
	return nil
}

// allowBlock is bitswap's per-block filter: a block is served to p when it
// belongs to a DAG that p is allowed. The index of block→roots is written
// when a DAG is imported, fetched or pinned.
//
// It runs in bitswap's goroutines, which do not recover, on every want a
// peer sends: a panic here refuses the block rather than end the daemon.
func (e *Exchange) allowBlock(p peer.ID, c cid.Cid) (ok bool) {
	defer func() {
		if v := recover(); v != nil {
			e.recovered(PanicBitswap, v, "peer", p, "cid", c)
			ok = false
		}
	}()
	ok, err := e.s.rootsOf(e.ctx, c, func(root cid.Cid) bool {
		return e.access.Allowed(p, root)
	})
	if err != nil {
		e.log.Warn("bitswap access check", "peer", p, "cid", c, "err", err)
		return false
	}
	if !ok {
		e.log.Debug("bitswap request refused", "peer", p, "cid", c)
	}
	return ok
}

// recovered logs a panic recovered while serving a peer, with its stack
// (so it must be called from the deferred function that recovered it),
// and tells e.panicked.
func (e *Exchange) recovered(where string, v any, attrs ...any) {
	attrs = append([]any{"where", where, "panic", fmt.Sprint(v)}, attrs...)
	e.log.Error("panic recovered", append(attrs, "stack", string(debug.Stack()))...)
	if e.panicked != nil {
		e.panicked(where)
	}
}

type fetchMethod int

const (
	methodAuto fetchMethod = iota
	methodBitswap
	// methodNone moves nothing: there is no peer to fetch from, so a
	// block not held here fails the fetch (errNoSource).
	methodNone
)

// Fetch makes the whole DAG under root local, fetching from peer from what
// is missing: nothing at all when the DAG is already complete. It uses the
// bulk protocol and falls back to bitswap only when the peer does not speak
// it; other failures of the bulk path are returned as they are, since
// bitswap from the same peer would meet the same fault. Every block is
// hash-checked on arrival. A failed fetch pins nothing; the blocks it did
// receive stay (until GC) so that a retry moves only the rest.
func (e *Exchange) Fetch(ctx context.Context, from peer.ID, root cid.Cid, o FetchOptions) (FetchStats, error) {
	return e.fetch(ctx, from, root, o, methodAuto)
}

// FetchBitswap is Fetch over bitswap only.
func (e *Exchange) FetchBitswap(ctx context.Context, from peer.ID, root cid.Cid, o FetchOptions) (FetchStats, error) {
	return e.fetch(ctx, from, root, o, methodBitswap)
}

// transfer is what a fetch method moved.
type transfer struct {
	blocks int
	bytes  int64
}

func (e *Exchange) fetch(ctx context.Context, from peer.ID, root cid.Cid, o FetchOptions, m fetchMethod) (FetchStats, error) {
	start := time.Now()
	st := FetchStats{Method: "local"}
	fail := func(err error) (FetchStats, error) {
		st.Duration = time.Since(start)
		if from == "" {
			return st, fmt.Errorf("fetch %s: %w", root, err)
		}
		return st, fmt.Errorf("fetch %s from %s: %w", root, from, err)
	}
	if err := e.ctx.Err(); err != nil {
		return fail(ErrClosed)
	}
	e.s.gcMu.RLock()
	defer e.s.gcMu.RUnlock()

	sc, err := e.s.scan(ctx, root)
	if err != nil {
		return fail(err)
	}
	if len(sc.missing) > 0 {
		var t transfer
		switch m {
		case methodAuto:
			st.Method = "bulk"
			t, err = e.fetchBulk(ctx, from, root, sc.missing, o.MaxBytes, o.Progress)
			if errors.Is(err, errBulkUnsupported) {
				e.log.Debug("peer lacks the bulk protocol, using bitswap", "peer", from, "root", root)
				st.Method = "bitswap"
				t, err = e.fetchBitswap(ctx, from, root, sc.missing, o.MaxBytes, o.Progress)
			}
		case methodBitswap:
			st.Method = "bitswap"
			t, err = e.fetchBitswap(ctx, from, root, sc.missing, o.MaxBytes, o.Progress)
		case methodNone:
			return fail(fmt.Errorf("%w: %d subtrees are not held here and no other peer was named, first %s", errNoSource, len(sc.missing), sc.missing[0]))
		}
		st.BlocksFetched, st.BytesFetched = t.blocks, t.bytes
		if err != nil {
			e.log.Info("fetch failed", "peer", from, "root", root, "method", st.Method, "blocks", t.blocks, "err", err)
			return fail(fmt.Errorf("%s: %w", st.Method, err))
		}
		if sc, err = e.s.scan(ctx, root); err != nil {
			return fail(err)
		}
		if len(sc.missing) > 0 {
			return fail(fmt.Errorf("%w: the peer sent %d blocks but %d subtrees are still missing, first %s",
				ErrIncomplete, t.blocks, len(sc.missing), sc.missing[0]))
		}
	}
	if err := e.s.commit(root, sc.held, o.Pin); err != nil {
		return fail(err)
	}
	st.Blocks, st.Bytes = len(sc.held), sc.bytes
	st.Duration = time.Since(start)
	return st, nil
}
