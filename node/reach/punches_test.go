package reach

import (
	"testing"
	"time"

	"github.com/e31network/e31/p2p"
	"github.com/libp2p/go-libp2p/core/peer"
)

// A punch has failed once every try libp2p makes has failed in a row; a
// try that succeeds, or a failure long after the last, starts the count
// again.
func TestPunchFailsOnlyOnItsLastTry(t *testing.T) {
	l := NewPunches(0)
	p := peer.ID("peer")
	now := time.Now()
	fail := p2p.HolePunchResult{Peer: p, Err: "dial timed out"}
	failed := func() bool {
		l.mu.Lock()
		defer l.mu.Unlock()
		return l.last[p].failed()
	}
	for i := 1; i < p2p.HolePunchAttempts; i++ {
		l.recordAt(fail, now.Add(time.Duration(i)*time.Second))
		if failed() {
			t.Fatalf("punch counted failed after try %d of %d", i, p2p.HolePunchAttempts)
		}
	}
	l.recordAt(fail, now.Add(10*time.Second))
	if !failed() {
		t.Fatalf("punch not counted failed after %d failed tries", p2p.HolePunchAttempts)
	}

	l.recordAt(p2p.HolePunchResult{Peer: p, Success: true}, now.Add(20*time.Second))
	l.recordAt(fail, now.Add(21*time.Second))
	if failed() {
		t.Fatal("one failed try after a success counted the punch failed")
	}

	later := now.Add(time.Hour)
	for i := 1; i < p2p.HolePunchAttempts; i++ {
		l.recordAt(fail, later.Add(time.Duration(i)*punchTriesApart*2))
	}
	if failed() {
		t.Fatal("tries far apart counted as one punch's")
	}
}
