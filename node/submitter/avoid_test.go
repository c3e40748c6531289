package submitter

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/e31network/e31/ledger"
	"github.com/e31network/e31/market"
	"github.com/e31network/e31/node/api"
	"github.com/e31network/e31/node/wire"
	"github.com/e31network/e31/node/wire/wiretest"
	"github.com/e31network/e31/p2p"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// bodies returns what was published of one kind, in order.
func (g *memGossip) bodies(kind string) []any {
	g.mu.Lock()
	defer g.mu.Unlock()
	var out []any
	for _, p := range g.out {
		if p.kind == kind {
			out = append(out, p.body)
		}
	}
	return out
}

// announcedLeases says every lease was announced.
type announcedLeases struct{}

func (announcedLeases) LeaseParties(string) (string, string, bool) { return "", "", true }

// queuedJob stores a queued job and loads it.
func (h *harness) queuedJob(t *testing.T, now time.Time) *jobTracker {
	t.Helper()
	r := h.leasedJob(t, now)
	j := h.s.jobs.get(r.ID)
	if err := j.update(func(r *Record) error {
		r.State, r.Lease, r.Envelope = api.JobQueued, nil, []byte("signed declaration")
		r.Steps = r.Steps[:1]
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return j
}

// A provider Match assigns a queued job to in two passes, and that does not
// propose AvoidAfter after the first, is avoided for the job, and the job
// is re-announced at once naming it. One that proposed, or was assigned in
// a single pass, is not.
func TestSquatterAvoided(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, Config{AvoidAfter: 3 * time.Second}, noOffers{})
		j := h.queuedJob(t, time.Now())
		squat, honest, once := wiretest.FreshParty(t).ID, wiretest.FreshParty(t).ID, wiretest.FreshParty(t).ID
		assign := func(ps ...string) {
			var res market.Result
			for _, p := range ps {
				res.Assignments = append(res.Assignments, market.Assignment{Job: j.id, Provider: p})
			}
			h.s.RecordWaits(res)
		}
		assign(squat.String(), honest.String(), once.String())
		(failureWatch{j}).noteProposal(honest)
		time.Sleep(time.Second)
		assign(squat.String(), honest.String())
		time.Sleep(time.Second)
		h.s.checkFailures(context.Background(), time.Now())
		if got := h.job(t, j.id).Avoid; got != nil {
			t.Fatalf("avoided %v within AvoidAfter", got)
		}
		time.Sleep(2 * time.Second)
		h.s.checkFailures(context.Background(), time.Now())
		got := h.job(t, j.id)
		if !slices.Equal(got.Avoid, []string{squat.String()}) || got.State != api.JobQueued {
			t.Fatalf("job %s avoids %v, want queued avoiding only the squatter %s", got.State, got.Avoid, squat)
		}
		rq := h.gossip.bodies(wire.KindRequeue)
		if len(rq) != 1 {
			t.Fatalf("%d requeues, want 1", len(rq))
		}
		b := rq[0].(wire.RequeueBody)
		if len(b.Avoid) != 1 || !slices.Equal(b.Avoid[0].Providers, []string{squat.String()}) {
			t.Fatalf("requeue avoids %+v", b.Avoid)
		}
		// Once avoided, the squatter is not named again.
		h.s.checkFailures(context.Background(), time.Now())
		if n := len(h.gossip.bodies(wire.KindRequeue)); n != 1 {
			t.Fatalf("%d requeues after a second check, want 1", n)
		}
	})
}

// A lease that reaches neither its run nor a receipt within RunWithin is
// released by the submitter as never run, holding nothing on record, and
// the job goes back to the queue avoiding the provider.
func TestLeaseNeverRunGivenUp(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		h := newHarness(t, Config{RunWithin: 5 * time.Second}, noOffers{lastSeen: start})
		h.s.d.Leases = announcedLeases{}
		r := h.leasedJob(t, start)
		if err := h.s.jobs.get(r.ID).update(func(r *Record) error {
			r.State, r.Envelope = api.JobRenting, []byte("signed declaration")
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		time.Sleep(4 * time.Second)
		h.s.checkFailures(context.Background(), time.Now())
		if j := h.job(t, r.ID); j.State != api.JobRenting {
			t.Fatalf("given up within RunWithin: %s", j.State)
		}
		time.Sleep(2 * time.Second)
		h.s.checkFailures(context.Background(), time.Now())
		j := h.job(t, r.ID)
		if j.State != api.JobQueued || j.Lease != "" || !slices.Equal(j.Avoid, []string{h.prov.ID.String()}) {
			t.Fatalf("after RunWithin: %s, lease %q, avoid %v", j.State, j.Lease, j.Avoid)
		}
		rel := h.gossip.bodies(wire.KindRelease)
		if len(rel) != 1 {
			t.Fatalf("%d releases", len(rel))
		}
		if b := rel[0].(wire.ReleaseBody); !b.Requeued || b.HeldMs != 0 || b.Lease != r.Lease.Terms.ID {
			t.Fatalf("release %+v, want the lease requeued with nothing held", b)
		}
		checkNothingHeld(t, h, r.Lease.Terms.ID)
		if n := h.gossip.count(wire.KindRequeue); n != 1 {
			t.Fatalf("%d requeues, want 1", n)
		}
	})
}

// A provider that withholds its receipts: the lease ends on the
// submitter's side ReceiptsDue after the run started, its record holding
// only what was countersigned (nothing). With the output back the job is
// complete; without, it goes back to the queue avoiding the provider.
func TestReceiptsWithheld(t *testing.T) {
	for _, output := range []bool{true, false} {
		synctest.Test(t, func(t *testing.T) {
			start := time.Now()
			h := newHarness(t, Config{ReceiptsDue: 5 * time.Second}, noOffers{lastSeen: start})
			r := h.leasedJob(t, start)
			if err := h.s.jobs.get(r.ID).update(func(r *Record) error {
				r.step(api.StepRun, start)
				r.Envelope = []byte("signed declaration")
				if output {
					r.Output = wiretest.CID(t, "output")
				}
				return nil
			}); err != nil {
				t.Fatal(err)
			}
			time.Sleep(4 * time.Second)
			h.s.checkFailures(context.Background(), time.Now())
			if j := h.job(t, r.ID); j.State != api.JobRunning {
				t.Fatalf("ended within ReceiptsDue: %s", j.State)
			}
			time.Sleep(2 * time.Second)
			h.s.checkFailures(context.Background(), time.Now())
			j := h.job(t, r.ID)
			switch {
			case output && (j.State != api.JobReleased || j.Outcome != string(ledger.OutcomeCompleted) || j.Avoid != nil):
				t.Fatalf("with the output back: %s %s, avoid %v", j.State, j.Outcome, j.Avoid)
			case !output && (j.State != api.JobQueued || !slices.Equal(j.Avoid, []string{h.prov.ID.String()})):
				t.Fatalf("without the output: %s, avoid %v", j.State, j.Avoid)
			}
			checkNothingHeld(t, h, r.Lease.Terms.ID)
			for _, b := range h.gossip.bodies(wire.KindRelease) {
				if b := b.(wire.ReleaseBody); b.HeldMs != 0 || b.Requeued == output {
					t.Fatalf("release %+v (output back %t)", b, output)
				}
			}
		})
	}
}

// checkNothingHeld checks that the one record of the lease is this side's,
// final, and holds no time.
func checkNothingHeld(t *testing.T, h *harness, lease string) {
	t.Helper()
	es, err := h.ledger.ByLease(context.Background(), lease)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(es); n != 0 {
		t.Fatalf("%d receipts countersigned", n)
	}
	oneSided := h.ledger.OneSided()
	if len(oneSided) != 1 {
		t.Fatalf("%d one-sided records, want 1", len(oneSided))
	}
	if o := oneSided[0]; o.Lease != lease || !o.Final || o.Held() != 0 || o.Evidence == nil {
		t.Fatalf("one-sided record %+v, want a final one of %s holding nothing, with the lease as evidence", o, lease)
	}
}

// A provider given the job that asked to stage its inputs before the lease
// is staging, not squatting, for wire.StageBeforeLeaseMax; past that it is
// a squatter like any other.
func TestStagingBeforeTheLeaseIsNotSquatting(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, Config{AvoidAfter: 3 * time.Second}, noOffers{})
		j := h.queuedJob(t, time.Now())
		stager := wiretest.FreshParty(t).ID
		assign := func() {
			h.s.RecordWaits(market.Result{Assignments: []market.Assignment{{Job: j.id, Provider: stager.String()}}})
		}
		assign()
		j.mu.Lock()
		(failureWatch{j}).noteStaging(stager, time.Now())
		j.mu.Unlock()
		time.Sleep(time.Second)
		assign()
		time.Sleep(time.Minute)
		h.s.checkFailures(context.Background(), time.Now())
		if got := h.job(t, j.id).Avoid; got != nil {
			t.Fatalf("a provider staging before the lease avoided: %v", got)
		}
		time.Sleep(wire.StageBeforeLeaseMax)
		h.s.checkFailures(context.Background(), time.Now())
		if got := h.job(t, j.id).Avoid; !slices.Equal(got, []string{stager.String()}) {
			t.Fatalf("avoids %v past the staging bound, want %s", got, stager)
		}
	})
}

// requeuesValid fails t unless peers would accept every requeue h
// published: a requeue they refuse leaves its jobs out of every view.
func requeuesValid(t *testing.T, h *harness) {
	t.Helper()
	for _, b := range h.gossip.bodies(wire.KindRequeue) {
		// Signed now, as the node's gossip signs it: the avoids' times
		// are bounded from then.
		sealed, err := p2p.Seal(h.sub.SK, wire.KindRequeue, b, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		s, err := p2p.Open(sealed.Raw)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := wire.CheckRequeueKnown(s, func([]byte, peer.ID) bool { return true }); err != nil {
			t.Fatalf("peers refuse requeue %+v: %v", b, err)
		}
	}
}

// A provider this node's view shows free now and then, between one of its
// leases and the next, is assigned the job in a pass here and there and
// does not propose, being busy: it is not avoided. One assigned the job in
// every pass is.
func TestBusyProviderNotAvoided(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, Config{AvoidAfter: 3 * time.Second}, noOffers{})
		j := h.queuedJob(t, time.Now())
		busy, squat := wiretest.FreshParty(t).ID.String(), wiretest.FreshParty(t).ID.String()
		pass := func(p string) {
			var res market.Result
			if p == "" {
				res.Waiting = []market.Wait{{Job: j.id, Reason: "no offer has 1 free GPU"}}
			} else {
				res.Assignments = []market.Assignment{{Job: j.id, Provider: p}}
			}
			h.s.RecordWaits(res)
			time.Sleep(250 * time.Millisecond)
		}
		for i := range 40 {
			switch i % 8 {
			case 0, 3:
				pass(busy) // 2 passes in 8: a quarter
			default:
				pass("")
			}
		}
		h.s.checkFailures(context.Background(), time.Now())
		if got := h.job(t, j.id).Avoid; got != nil {
			t.Fatalf("a provider assigned in a quarter of the passes avoided: %v", got)
		}
		for range 16 {
			pass(squat)
		}
		h.s.checkFailures(context.Background(), time.Now())
		if got := h.job(t, j.id).Avoid; !slices.Equal(got, []string{squat}) {
			t.Fatalf("avoids %v, want only the provider assigned in every pass, %s", got, squat)
		}
		requeuesValid(t, h)
	})
}

// Match here assigning a job to this node's own provider, which does not
// propose, never makes the job avoid this node; and a lease of its own
// provider that never runs puts the job back in the queue without naming
// this node, in a requeue that peers accept.
func TestOwnProviderNeverAvoided(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		h := newHarness(t, Config{AvoidAfter: 3 * time.Second, RunWithin: 5 * time.Second}, noOffers{lastSeen: start})
		h.s.d.Leases = announcedLeases{}
		h.prov = h.sub // the lease below is from this node's own provider
		self := h.sub.ID.String()
		j := h.queuedJob(t, start)
		for range 20 {
			h.s.RecordWaits(market.Result{Assignments: []market.Assignment{{Job: j.id, Provider: self}}})
			time.Sleep(250 * time.Millisecond)
		}
		h.s.checkFailures(context.Background(), time.Now())
		if got := h.job(t, j.id); got.Avoid != nil || h.gossip.count(wire.KindRequeue) != 0 {
			t.Fatalf("own provider, assigned in every pass: avoid %v, %d requeues", got.Avoid, h.gossip.count(wire.KindRequeue))
		}

		r := h.leasedJob(t, time.Now())
		if err := h.s.jobs.get(r.ID).update(func(r *Record) error {
			r.State, r.Envelope = api.JobRenting, []byte("signed declaration")
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		time.Sleep(6 * time.Second)
		h.s.checkFailures(context.Background(), time.Now())
		got := h.job(t, r.ID)
		if got.State != api.JobQueued || got.Avoid != nil {
			t.Fatalf("own lease never run: %s, avoid %v; want queued, avoiding no one", got.State, got.Avoid)
		}
		if h.gossip.count(wire.KindRequeue) != 1 {
			t.Fatalf("%d requeues, want the job re-announced once", h.gossip.count(wire.KindRequeue))
		}
		requeuesValid(t, h)
	})
}

// A record that names this node in its avoid list, as one saved by an
// older version could, is re-announced without the name.
func TestOwnNameLeftOutOfAvoidList(t *testing.T) {
	h := newHarness(t, Config{}, noOffers{})
	other := wiretest.FreshParty(t).ID.String()
	announceAvoiding(context.Background(), &h.s.parts, nil, "job", []byte("signed declaration"),
		[]wire.Avoided{{Provider: h.sub.ID.String(), Until: time.Now().Add(time.Hour)}, {Provider: other, Until: time.Now().Add(time.Hour)}})
	rq := h.gossip.bodies(wire.KindRequeue)
	if len(rq) != 1 {
		t.Fatalf("%d requeues, want 1", len(rq))
	}
	if b := rq[0].(wire.RequeueBody); len(b.Avoid) != 1 || !slices.Equal(b.Avoid[0].Providers, []string{other}) {
		t.Fatalf("requeue avoids %+v, want only %s", b.Avoid, other)
	}
	requeuesValid(t, h)
}

// A round is lost when an epoch pass assigns a queued job and the next
// epoch's pass finds it still queued; a pass that only says why the job
// waits loses nothing, and a job leased before the next pass loses
// nothing either.
func TestRoundsLost(t *testing.T) {
	h := newHarness(t, Config{}, noOffers{})
	j := h.queuedJob(t, time.Now())
	prov := wiretest.FreshParty(t).ID.String()
	assigned := market.Result{Assignments: []market.Assignment{{Job: j.id, Provider: prov}}}
	waiting := market.Result{Waiting: []market.Wait{{Job: j.id, Reason: "no provider has 8 free GPUs"}}}
	lost := func() float64 { return testutil.ToFloat64(h.s.d.Metrics.RoundsLost) }

	h.s.RecordWaits(waiting)
	h.s.RecordWaits(assigned)
	if got := lost(); got != 0 {
		t.Fatalf("after a wait and a first assignment: %v rounds lost, want 0", got)
	}
	h.s.RecordWaits(assigned) // still queued: the first assignment's round is lost
	h.s.RecordWaits(waiting)  // and so is the second's
	h.s.RecordWaits(waiting)
	if got := lost(); got != 2 {
		t.Fatalf("after two assignments the job outlived: %v rounds lost, want 2", got)
	}
	h.s.RecordWaits(assigned)
	if err := j.update(func(r *Record) error { r.State = api.JobRenting; return nil }); err != nil {
		t.Fatal(err)
	}
	h.s.RecordWaits(assigned)
	if got := lost(); got != 2 {
		t.Fatalf("after a lease made from the round: %v rounds lost, want 2", got)
	}
}

// reachable is a Deps.Reach whose answer the test sets.
type reachable struct {
	mu    sync.Mutex
	ok    bool
	tries int
}

func (r *reachable) reach(context.Context, peer.ID) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.tries++
	if !r.ok {
		return errors.New("all dials failed: i/o timeout")
	}
	return nil
}

func (r *reachable) set(ok bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.ok = ok
}

// A job whose only provider cannot reach it, and which it cannot reach,
// is not avoided: it waits for a path. Once the provider is reached, it
// gets another AvoidAfter to propose; still silent, it is avoided, but
// only for AvoidFor: the avoid lifts, the job is re-announced without it,
// and the provider's next proposal is taken: the job runs there.
func TestAvoidListNeverEndsAJob(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const after, avoidFor = 3 * time.Second, time.Minute
		h := newHarness(t, Config{AvoidAfter: after, AvoidFor: avoidFor}, noOffers{})
		var r reachable
		h.s.d.Reach = r.reach
		j := h.queuedJob(t, time.Now())
		prov := h.prov.ID.String()
		// Match keeps assigning the job to its only provider, which does
		// not propose, for as long as check says, unless the job avoids it.
		assignFor := func(d time.Duration) {
			t.Helper()
			for end := time.Now().Add(d); time.Now().Before(end); {
				if !slices.Contains(h.job(t, j.id).Avoid, prov) {
					h.s.RecordWaits(market.Result{Assignments: []market.Assignment{{Job: j.id, Provider: prov}}})
				}
				time.Sleep(time.Second)
				h.s.checkFailures(context.Background(), time.Now())
			}
		}

		assignFor(3 * after)
		got := h.job(t, j.id)
		if len(got.Avoid) != 0 || got.State != api.JobQueued || !strings.Contains(got.Reason, "cannot reach either") {
			t.Fatalf("an unreachable provider: avoid %v, %s, %q; want not avoided, queued, waiting for a path", got.Avoid, got.State, got.Reason)
		}
		if r.tries < 2 {
			t.Fatalf("tried to reach the provider %d times, want again after each AvoidAfter", r.tries)
		}

		// Reachable now: a window of its own to propose, then avoided.
		r.set(true)
		assignFor(after + 2*time.Second)
		if got := h.job(t, j.id); len(got.Avoid) != 0 || !strings.Contains(got.Reason, "reached it") {
			t.Fatalf("a provider reached for the first time: avoid %v, %q; want another window", got.Avoid, got.Reason)
		}
		assignFor(after + 2*time.Second)
		got = h.job(t, j.id)
		if !slices.Equal(got.Avoid, []string{prov}) || !strings.Contains(got.Reason, "avoiding it until") {
			t.Fatalf("a reached provider still silent: avoid %v, %q; want it avoided, for a while", got.Avoid, got.Reason)
		}
		rq := h.gossip.bodies(wire.KindRequeue)
		b := rq[len(rq)-1].(wire.RequeueBody)
		if len(b.Avoid) != 1 || len(b.Avoid[0].Until) != 1 || b.Avoid[0].UntilOf(0, time.Time{}).After(time.Now().Add(avoidFor)) {
			t.Fatalf("re-announced with avoid %+v, want the provider until within %s", b.Avoid, avoidFor)
		}
		requeuesValid(t, h)

		// The avoid lifts after AvoidFor, and the job is announced without it.
		time.Sleep(avoidFor)
		h.s.checkFailures(context.Background(), time.Now())
		got = h.job(t, j.id)
		if len(got.Avoid) != 0 || !strings.Contains(got.Reason, "lifted") {
			t.Fatalf("after AvoidFor: avoid %v, %q; want it lifted", got.Avoid, got.Reason)
		}
		rq = h.gossip.bodies(wire.KindRequeue)
		if b := rq[len(rq)-1].(wire.RequeueBody); b.Avoid != nil {
			t.Fatalf("re-announced after the lift with avoid %+v, want none", b.Avoid)
		}

		// The provider proposes, and the job runs there.
		sl := wiretest.SignedLease(t, h.prov, h.sub)
		d := h.job(t, j.id)
		rec := j.snapshot()
		sl.Terms.Job, sl.Terms.Proposed = d.ID, time.Now().UnixMilli()
		sl.Terms.GPUs = sl.Terms.GPUs[:rec.Declaration.Request.GPUs]
		sl.Terms.CPUs, sl.Terms.MemoryBytes, sl.Terms.Limit = rec.Declaration.Request.CPUs, uint64(rec.Declaration.Request.Memory), rec.Declaration.Request.Limit
		if err := sl.SignProvider(h.prov.SK); err != nil {
			t.Fatal(err)
		}
		if _, err := j.propose(h.prov.ID, sl); err != nil {
			t.Fatalf("the provider's proposal once its avoid lifted: %v", err)
		}
		if got := h.job(t, j.id); got.State != api.JobRenting || got.Provider != prov {
			t.Fatalf("after the proposal: %s on %q, want renting on the provider", got.State, got.Provider)
		}

		// Avoided again, it is avoided twice as long.
		if n := j.snapshot().Avoided[prov]; n != 1 {
			t.Fatalf("avoided %d times, want 1", n)
		}
		if got, want := (&Config{AvoidFor: avoidFor}).avoidFor(2), 2*avoidFor; got != want {
			t.Fatalf("a second avoid lasts %s, want %s", got, want)
		}
		if got := (&Config{AvoidFor: avoidFor}).avoidFor(40); got != wire.MaxAvoidFor {
			t.Fatalf("the 40th avoid lasts %s, want the bound %s", got, wire.MaxAvoidFor)
		}
	})
}
