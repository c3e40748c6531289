package p2p

import (
	"errors"
	"fmt"
	"io"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/p2p/protocol/circuitv2/relay"
)

// circuit is one circuit a relay splices: a, the source's hop stream, to
// b, the stop stream to its destination.
type circuit struct {
	// Immutable once spliced.
	r         *relayService
	src, dest peer.ID
	a, b      network.Stream
	cleanup   func() // releases the circuit's slots in the relay; once
	keys      []budgetKey
	allow     relay.RelayLimit // what it carries while its ends are not paired
	timer     *time.Timer      // member circuits: the check for a live lease

	ended   atomic.Bool  // the relay cut it; counted once
	closed  atomic.Bool  // both copies are done
	running atomic.Int32 // copies still running

	mu sync.Mutex // guards the fields below; memory only
	// paired is the last answer of whether its ends hold a live lease
	// together, asked at askedAt (isPaired).
	paired  bool
	askedAt time.Time
	// control is what it carried each way while its ends were not
	// paired; pending, data not yet charged to the budgets.
	control [2]int64
	pending int64
}

// errCircuitCut ends a copy that the relay will not let go on.
var errCircuitCut = errors.New("relay cut the circuit")

// errInvalidWrite: a writer reported an impossible count (as io's).
var errInvalidWrite = errors.New("invalid write result")

// spliceLimited carries the circuit as go-libp2p's relay carries a limited
// one: the limit's bytes each way, then no more, for the limit's time.
func (c *circuit) spliceLimited() {
	c.allow = c.r.allow
	deadline := time.Now().Add(c.allow.Duration)
	_ = c.a.SetDeadline(deadline)
	_ = c.b.SetDeadline(deadline)
	c.running.Store(2)
	go c.copyLimited(c.b, c.a)
	go c.copyLimited(c.a, c.b)
}

func (c *circuit) copyLimited(dst, src network.Stream) {
	defer c.finish()
	defer c.recovering()
	buf := make([]byte, c.r.rc.BufferSize)
	n, err := c.copy(dst, io.LimitReader(src, c.allow.Data), buf, func(n int) error {
		c.r.gate.stats.bytes.WithLabelValues(relayBytesControl).Add(float64(n))
		return nil
	})
	if err != nil {
		_ = src.Reset()
		_ = dst.Reset()
		return
	}
	_ = dst.CloseWrite()
	if n == c.allow.Data {
		_ = src.CloseRead() // the limit: what comes after is dropped
	}
}

// spliceMember carries a circuit between two members on a relay that
// carries data, unmarked, with no deadline: while its ends hold a live
// lease together it carries their data, counted against their budgets;
// otherwise it carries no more than a limited circuit, and lasts no
// longer. libp2p keeps one connection to a peer and opens no second
// circuit while one is up, so the circuit a provider opened to propose a
// lease, before the lease existed, is the one the lease's data will
// need: the relay must judge its bytes as they come, not its ends once.
func (c *circuit) spliceMember() {
	c.allow = c.r.allow
	c.timer = time.AfterFunc(c.allow.Duration, c.checkPaired)
	c.running.Store(2)
	go c.copyMember(0, c.b, c.a)
	go c.copyMember(1, c.a, c.b)
}

func (c *circuit) copyMember(dir int, dst, src network.Stream) {
	defer c.finish()
	defer c.recovering()
	buf := make([]byte, c.r.rc.BufferSize)
	_, err := c.copy(dst, src, buf, func(n int) error { return c.account(dir, int64(n)) })
	if err != nil {
		_ = src.Reset()
		_ = dst.Reset()
		return
	}
	_ = dst.CloseWrite()
}

// account admits n more bytes, read one way (dir), before they are
// written on; an error cuts the circuit.
func (c *circuit) account(dir int, n int64) error {
	if c.isPaired(time.Now()) {
		c.mu.Lock()
		c.pending += n
		charge := int64(0)
		if c.pending >= dataCharge {
			charge, c.pending = c.pending, 0
		}
		c.mu.Unlock()
		if charge > 0 && c.r.gate.charge(c.keys, charge) {
			return c.cut(relayBudget)
		}
		return nil
	}
	c.mu.Lock()
	c.control[dir] += n
	over := c.control[dir] > c.allow.Data
	c.mu.Unlock()
	if !over {
		c.r.gate.stats.bytes.WithLabelValues(relayBytesControl).Add(float64(n))
		return nil
	}
	// Past the allowance: the bytes wait, unread, for the lease that may
	// be on its way (an array's task leases are announced about once a
	// second, after their staging began); none comes, the circuit is cut.
	if !c.awaitPaired() {
		return c.cut(relayAllowance)
	}
	c.mu.Lock()
	c.control[dir] -= n
	c.mu.Unlock()
	return c.account(dir, n)
}

// awaitPaired waits up to the gate's pairWait for the circuit's ends to
// be paired, and reports whether they are.
func (c *circuit) awaitPaired() bool {
	deadline := time.NewTimer(c.r.gate.pairWait)
	defer deadline.Stop()
	tick := time.NewTicker(pairPoll)
	defer tick.Stop()
	for {
		if c.isPaired(time.Now()) {
			return true
		}
		select {
		case <-c.r.ctx.Done():
			return false
		case <-deadline.C:
			return c.isPaired(time.Now())
		case <-tick.C:
		}
	}
}

// isPaired is whether the circuit's ends hold a live lease together. A yes
// holds for pairedCheck, so that a data circuit asks about once a second;
// a no is asked again for each read, since a lease's data follows its
// announcement by milliseconds, and an unpaired circuit reads little
// before it is cut. The gate is asked without c.mu held: it calls out to
// the node.
func (c *circuit) isPaired(now time.Time) bool {
	c.mu.Lock()
	if c.paired && now.Sub(c.askedAt) < pairedCheck {
		c.mu.Unlock()
		return true
	}
	c.mu.Unlock()
	p := c.r.gate.paired(c.src, c.dest)
	c.mu.Lock()
	c.paired, c.askedAt = p, now
	c.mu.Unlock()
	return p
}

// checkPaired runs every allowance's duration of a member circuit's life:
// one whose ends hold no live lease then has lasted as long as a limited
// circuit may.
func (c *circuit) checkPaired() {
	defer c.recovering()
	if c.closed.Load() {
		return
	}
	if c.r.gate.paired(c.src, c.dest) {
		c.timer.Reset(c.allow.Duration)
		return
	}
	if c.cut(relayUnpaired) == nil {
		return // already ended
	}
	_ = c.a.Reset()
	_ = c.b.Reset()
}

// cut counts and logs the relay's ending of the circuit for reason, once;
// it returns errCircuitCut, or nil if it had ended already.
func (c *circuit) cut(reason string) error {
	if c.ended.Swap(true) {
		return nil
	}
	c.r.gate.stats.circuitsEnded.WithLabelValues(reason).Inc()
	c.r.log.Debug("relay cut a circuit", "src", c.src, "dest", c.dest, "reason", reason)
	return errCircuitCut
}

// finish is each copy's end; the last one closes the circuit and charges
// what it carried since the last charge.
func (c *circuit) finish() {
	if c.running.Add(-1) > 0 {
		return
	}
	c.closed.Store(true)
	if c.timer != nil {
		c.timer.Stop()
	}
	_ = c.a.Close()
	_ = c.b.Close()
	c.mu.Lock()
	rest := c.pending
	c.pending = 0
	c.mu.Unlock()
	if rest > 0 {
		c.r.gate.charge(c.keys, rest)
	}
	c.cleanup()
}

// recovering, deferred in a copy, stops a panic there from ending the
// daemon: the circuit is reset and the panic logged and counted.
func (c *circuit) recovering() {
	v := recover()
	if v == nil {
		return
	}
	c.r.log.Error("panic recovered", "where", PanicRelay, "panic", fmt.Sprint(v), "src", c.src, "dest", c.dest, "stack", string(debug.Stack()))
	if c.r.panicked != nil {
		c.r.panicked(PanicRelay)
	}
	_ = c.a.Reset()
	_ = c.b.Reset()
}

// copy copies src to dst through buf as io.CopyBuffer does, asking admit
// before each read's bytes are written on, and counting them in libp2p's
// relay series.
func (c *circuit) copy(dst io.Writer, src io.Reader, buf []byte, admit func(n int) error) (int64, error) {
	var written int64
	for {
		nr, er := src.Read(buf)
		if nr > 0 {
			if err := admit(nr); err != nil {
				return written, err
			}
			nw, ew := dst.Write(buf[:nr])
			if nw < 0 || nr < nw {
				nw = 0
				if ew == nil {
					ew = errInvalidWrite
				}
			}
			written += int64(nw)
			if ew != nil {
				return written, ew
			}
			if nr != nw {
				return written, io.ErrShortWrite
			}
			if c.r.mt != nil {
				c.r.mt.BytesTransferred(nw)
			}
		}
		if er != nil {
			if er == io.EOF {
				return written, nil
			}
			return written, er
		}
	}
}
