package submitter

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/e31network/e31/market"
	"github.com/e31network/e31/node/api"
	"github.com/e31network/e31/node/wire"
	"github.com/e31network/e31/p2p"
)

// h100Digest is the digest of subshard s of class H100x8 with free boxes
// of 8 GPUs free and queued jobs waiting.
func h100Digest(s p2p.Shard, free, queued int) market.Digest {
	boxes := make([]int, 9)
	boxes[8] = free
	return market.Digest{Class: "H100x8", Index: s.Index, Count: s.Count, Providers: 2, FreeBoxes: boxes, Queued: queued}
}

// submitWholeBox submits an 8×H100 job from h, with markets m.
func submitWholeBox(t *testing.T, h *harness) api.Job {
	t.Helper()
	d := market.NewDeclaration("t", []string{"true"}, 8, market.Hour, nil)
	d.Request.GPUModel = "H100"
	raw, err := json.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	j, err := h.s.Submit(context.Background(), api.SubmitRequest{Declaration: raw}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return j
}

// A job that waited past MoveAfter in a market whose digest shows no room
// moves to one whose digest shows some: declared there as the next
// attempt of the job, which stays queued under its first ID, while the
// attempt it left ends withdrawn, its withdrawal told to the market it
// left. Before MoveAfter, or while its market has room, it stays.
func TestQueuedJobMovesToAMarketWithRoom(t *testing.T) {
	ctx := context.Background()
	h := newHarness(t, Config{MoveAfter: time.Minute}, noOffers{})
	a := p2p.Shard{Class: "H100x8", Index: 0, Count: 2}
	b := p2p.Shard{Class: "H100x8", Index: 1, Count: 2}
	f := &memFollower{}
	h.s.d.Markets = &Markets{Own: p2p.Shard{Class: "cpu", Count: 1}, Follow: f, Draw: func(int) int { return 0 },
		Digests: fixedDigests{h100Digest(a, 2, 0)}}
	j := submitWholeBox(t, h)
	if got := h.job(t, j.ID).Market; got != a.String() {
		t.Fatalf("declared in %q, want %q", got, a)
	}
	submitted := h.s.jobs.get(j.ID).snapshot().Submitted
	mv := mover{h.s.kit}

	h.s.d.Markets.Digests = fixedDigests{h100Digest(a, 2, 1), h100Digest(b, 2, 0)}
	if n := mv.pass(ctx, submitted.Add(2*time.Minute)); n != 0 {
		t.Fatalf("moved %d jobs out of a market with room", n)
	}
	h.s.d.Markets.Digests = fixedDigests{h100Digest(a, 0, 1), h100Digest(b, 2, 0)}
	if n := mv.pass(ctx, submitted.Add(59*time.Second)); n != 0 {
		t.Fatalf("moved %d jobs before MoveAfter", n)
	}
	if n := mv.pass(ctx, submitted.Add(61*time.Second)); n != 1 {
		t.Fatalf("moved %d jobs after MoveAfter without room; want 1", n)
	}

	left := h.s.jobs.get(j.ID).snapshot()
	if left.State != api.JobWithdrawn || left.Next == "" || !strings.Contains(left.Reason, "moved to market "+b.String()) {
		t.Fatalf("the attempt left: %s, next %q, reason %q; want withdrawn, a next, moved to %s", left.State, left.Next, left.Reason, b)
	}
	next := h.s.jobs.get(left.Next).snapshot()
	if next.Market == nil || *next.Market != b || next.State != api.JobQueued || next.Moves != 1 || next.root() != j.ID || next.Resumes != 0 {
		t.Fatalf("the next attempt: market %v, %s, %d moves, root %q, %d resumes; want %v, queued, 1, %q, 0", next.Market, next.State, next.Moves, next.root(), next.Resumes, b, j.ID)
	}
	if f.gossip(a).count(wire.KindWithdrawal) != 1 || f.gossip(b).rawCount() != 1 {
		t.Fatalf("withdrawals in %s: %d, declarations in %s: %d; want 1 and 1", a, f.gossip(a).count(wire.KindWithdrawal), b, f.gossip(b).rawCount())
	}
	view := h.job(t, j.ID)
	if view.State != api.JobQueued || view.Market != b.String() || len(view.Attempts) != 2 || view.Attempts[0].Market != a.String() {
		t.Fatalf("the job's view: %s in %q, %d attempts; want queued in %s, 2 attempts, the first in %s", view.State, view.Market, len(view.Attempts), b, a)
	}

	// It moves at most maxMoves times.
	for move := 2; move <= maxMoves+1; move++ {
		last := h.s.lastAttempt(h.s.jobs.get(j.ID)).snapshot()
		h.s.d.Markets.Digests = fixedDigests{h100Digest(*last.Market, 0, 1), h100Digest(other(*last.Market, a, b), 2, 0)}
		n := mv.pass(ctx, last.Submitted.Add(2*time.Minute))
		if want := map[bool]int{true: 1, false: 0}[move <= maxMoves]; n != want {
			t.Fatalf("move %d: moved %d jobs, want %d (at most %d moves)", move, n, want, maxMoves)
		}
	}
}

// other is whichever of a and b is not s.
func other(s, a, b p2p.Shard) p2p.Shard {
	if s == a {
		return b
	}
	return a
}

// A move a stop cut short is finished or undone at the next pass: an
// attempt marked as moving with no next attempt is unmarked and stays
// queued; one with a next ends withdrawn.
func TestMoveCutShortIsFinished(t *testing.T) {
	ctx := context.Background()
	h := newHarness(t, Config{MoveAfter: time.Minute}, noOffers{})
	a := p2p.Shard{Class: "H100x8", Index: 0, Count: 2}
	b := p2p.Shard{Class: "H100x8", Index: 1, Count: 2}
	h.s.d.Markets = &Markets{Own: p2p.Shard{Class: "cpu", Count: 1}, Follow: &memFollower{}, Draw: func(int) int { return 0 },
		Digests: fixedDigests{h100Digest(a, 2, 0)}}
	j := submitWholeBox(t, h)
	tr := h.s.jobs.get(j.ID)
	mark := func(next string) {
		if err := tr.update(func(r *Record) error { r.MovedTo, r.Next = &b, next; return nil }); err != nil {
			t.Fatal(err)
		}
	}
	mark("")
	if _, _, queued := tr.announcement(); queued {
		t.Fatal("an attempt marked as moving is re-announced")
	}
	mover{h.s.kit}.pass(ctx, time.Now())
	if r := tr.snapshot(); r.MovedTo != nil || r.State != api.JobQueued {
		t.Fatalf("a move with no next attempt: moving to %v, %s; want unmarked, queued", r.MovedTo, r.State)
	}
	mark("next-attempt")
	mover{h.s.kit}.pass(ctx, time.Now())
	if r := tr.snapshot(); r.State != api.JobWithdrawn || r.Next != "next-attempt" {
		t.Fatalf("a move with a next attempt: %s, next %q; want withdrawn", r.State, r.Next)
	}
}
