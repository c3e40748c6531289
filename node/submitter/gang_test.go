package submitter

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/e31network/e31/ledger"
	"github.com/e31network/e31/market"
	"github.com/e31network/e31/node/api"
	"github.com/e31network/e31/node/state"
	"github.com/e31network/e31/node/wire"
	"github.com/e31network/e31/node/wire/wiretest"
	"github.com/e31network/e31/p2p"
	"github.com/e31network/e31/testnet/poll"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/protocol"
)

// gangProviders answer the gang protocol as each part's provider would:
// they sign the gang lease with their own key, or decline; and they note
// every start and withdrawal they are told of.
type gangProviders struct {
	mu       sync.Mutex
	keys     map[peer.ID]wiretest.Party
	decline  peer.ID
	started  map[peer.ID]wire.SignedGangLease
	withdraw []peer.ID
}

func (g *gangProviders) Call(_ context.Context, to peer.ID, proto protocol.ID, req, reply any) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	switch proto {
	case wire.ProtoWithdraw:
		g.withdraw = append(g.withdraw, to)
		return nil
	case wire.ProtoGang:
	default:
		return nil
	}
	r := req.(wire.GangRequest)
	if err := r.Validate(); err != nil {
		return err
	}
	if r.Start {
		if err := r.Gang.Verify(); err != nil {
			return err
		}
		g.started[to] = r.Gang
		return nil
	}
	if to == g.decline {
		return p2p.Refuse(wire.CodeDeclined, errors.New("declined"))
	}
	part, _ := r.Gang.Terms.Part(r.Lease)
	signed := r.Gang
	if err := signed.SignProvider(g.keys[to].SK, part.Rank); err != nil {
		return err
	}
	reply.(*wire.GangReply).ProviderSig = signed.ProviderSigs[part.Rank]
	return nil
}

// gangOnRecord stores, as a previous run would have, a 2-part gang whose
// parts are leased from two providers and running, and loads it.
func gangOnRecord(t *testing.T, h *harness, provs []wiretest.Party) (string, market.Declaration) {
	t.Helper()
	now := time.Now()
	gang := "gangx"
	d := market.NewDeclaration("ddp", []string{"python3", "train.py"}, 1, market.Hour, nil)
	d.Request.Nodes = 2
	d.Output.Checkpoints = &market.Checkpoints{Path: "/ckpt", Every: 10 * market.Minute, Resume: market.ResumeAuto, MaxResumes: 1}
	if err := d.Validate(); err != nil {
		t.Fatal(err)
	}
	parent := &Record{ID: gang, Declaration: d, State: api.JobQueued, Submitted: now, RecordArray: RecordArray{Tasks: 2}}
	parent.step(api.StepSubmit, now)
	recs := []*Record{parent}
	for r, p := range provs {
		l := wiretest.SignedLease(t, p, h.sub)
		l.Terms.Job = market.TaskID(gang, r)
		l.Terms.ID = "lease-" + strings.Repeat(string(rune('a'+r)), 3)
		if err := l.SignProvider(p.SK); err != nil {
			t.Fatal(err)
		}
		if err := l.Countersign(h.sub.SK); err != nil {
			t.Fatal(err)
		}
		part := &Record{ID: l.Terms.Job, Declaration: d.Task(r), State: api.JobRunning, Lease: &l, Submitted: now, RecordArray: RecordArray{Array: gang, Index: r}}
		part.step(api.StepSubmit, now)
		part.step(api.StepRent, now)
		recs = append(recs, part)
	}
	for _, r := range recs {
		if err := h.records.Put(state.PrefixJob, r.ID, r); err != nil {
			t.Fatal(err)
		}
	}
	if err := h.s.Recover(); err != nil {
		t.Fatal(err)
	}
	return gang, d
}

// checkGangs checks every gang not over once, as each gang's run does in
// its loop.
func checkGangs(ctx context.Context, s *Submitter, now time.Time) {
	for id := range s.jobs.live() {
		if r := s.gangs.of(id); r != nil {
			r.check(ctx, now)
		}
	}
}

func gangHarness(t *testing.T) (*harness, *gangProviders, []wiretest.Party) {
	h := newHarness(t, Config{ProviderLostAfter: time.Hour, RequeueEvery: time.Hour}, noOffers{})
	provs := []wiretest.Party{wiretest.FreshParty(t), wiretest.FreshParty(t)}
	g := &gangProviders{keys: map[peer.ID]wiretest.Party{}, started: map[peer.ID]wire.SignedGangLease{}}
	for _, p := range provs {
		g.keys[p.ID] = p
	}
	h.s.d.Calls = g
	return h, g, provs
}

// Once every part is leased, each part's provider signs the gang lease
// that names every part, the submitter signs it last and hands it to each
// provider, which may start; the gang's record keeps it.
func TestGangAssembly(t *testing.T) {
	h, g, provs := gangHarness(t)
	gang, _ := gangOnRecord(t, h, provs)
	h.s.gangs.of(gang).assemble(context.Background())
	if len(g.started) != 2 {
		t.Fatalf("%d providers told to start, want 2", len(g.started))
	}
	for _, p := range provs {
		l, ok := g.started[p.ID]
		if !ok {
			t.Fatalf("provider %s was not told to start", p.ID)
		}
		if err := l.Verify(); err != nil || len(l.Terms.Parts) != 2 || l.Terms.Gang != gang {
			t.Fatalf("gang lease %+v: %v", l.Terms, err)
		}
	}
	var rec Record
	h.s.jobs.get(gang).view(func(r *Record) { rec = r.copy() })
	if rec.GangLease == nil || rec.GangLease.Verify() != nil {
		t.Fatal("the gang's record does not keep its signed gang lease")
	}
	j := h.job(t, gang)
	if len(j.Parts) != 2 || j.Parts[0].Provider != provs[0].ID.String() || j.Parts[1].Provider != provs[1].ID.String() {
		t.Fatalf("parts %+v", j.Parts)
	}
}

// A provider that declines to sign gives the whole gang up: every part's
// lease released unrun and back in the queue, the decliner avoided for its
// part only, and nobody told to start.
func TestGangGivenUpWhenAProviderDeclines(t *testing.T) {
	h, g, provs := gangHarness(t)
	g.decline = provs[1].ID
	gang, _ := gangOnRecord(t, h, provs)
	h.s.gangs.of(gang).assemble(context.Background())
	if len(g.started) != 0 {
		t.Fatalf("%d providers told to start a gang one declined", len(g.started))
	}
	for r := range 2 {
		var rec Record
		h.s.jobs.get(market.TaskID(gang, r)).view(func(x *Record) { rec = x.copy() })
		if rec.State != api.JobQueued || rec.Lease != nil {
			t.Fatalf("part %d: %s with lease %v, want queued again", r, rec.State, rec.Lease)
		}
		if avoided := slices.Contains(rec.Avoid, provs[r].ID.String()); avoided != (r == 1) {
			t.Fatalf("part %d avoids its provider: %v", r, avoided)
		}
	}
}

// A part that fails ends the gang: the part still running is withdrawn
// (its provider stops it, with its grace to checkpoint), and the gang
// ends as the failed part did, naming it; declared resume: auto, it then
// goes on whole, as its next attempt.
func TestGangEndsWithItsFailedPart(t *testing.T) {
	h, g, provs := gangHarness(t)
	gang, _ := gangOnRecord(t, h, provs)
	h.s.gangs.of(gang).assemble(context.Background())
	ctx := context.Background()
	lost := h.s.jobs.get(market.TaskID(gang, 0))
	if err := lost.update(func(r *Record) error {
		r.State, r.Outcome, r.Attribution, r.Reason = api.JobReleased, ledger.OutcomeProviderLost, ledger.AttributionProvider, "provider silent"
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	checkGangs(ctx, h.s, time.Now())
	poll.Until(t, "the running part's provider told to stop", 10*time.Second, func() bool {
		g.mu.Lock()
		defer g.mu.Unlock()
		return slices.Contains(g.withdraw, provs[1].ID)
	})
	var other Record
	h.s.jobs.get(market.TaskID(gang, 1)).view(func(r *Record) { other = r.copy() })
	if !other.terminal() {
		// The provider's final receipt ends it; here, by hand.
		if err := h.s.jobs.get(market.TaskID(gang, 1)).update(func(r *Record) error {
			r.State, r.Outcome, r.Attribution = api.JobReleased, ledger.OutcomeWithdrawn, ledger.AttributionSubmitter
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	j, _ := h.s.arrayView(h.s.jobs.get(gang), 0, true)
	if !j.State.Terminal() || j.Outcome != string(ledger.OutcomeProviderLost) || !strings.Contains(j.Reason, "part 0") {
		t.Fatalf("gang %s %s (%s), want provider-lost naming part 0", j.State, j.Outcome, j.Reason)
	}
	checkGangs(ctx, h.s, time.Now())
	j = h.job(t, gang)
	if len(j.Attempts) != 2 || j.State != api.JobQueued || len(j.Parts) != 2 {
		t.Fatalf("after the gang failed: %s, %d attempts, %d parts; want it going on whole as a second attempt", j.State, len(j.Attempts), len(j.Parts))
	}
	if j.Attempts[0].Outcome != string(ledger.OutcomeProviderLost) {
		t.Fatalf("first attempt %+v", j.Attempts[0])
	}
}

// A gang that fails by its own fault runs again whole under
// request.retries, counted apart from resumptions, and stays failed once
// they are used up.
func TestGangRetries(t *testing.T) {
	h, _, provs := gangHarness(t)
	gang, _ := gangOnRecord(t, h, provs)
	ctx := context.Background()
	if err := h.s.jobs.get(gang).update(func(r *Record) error {
		r.Declaration.Request.Retries, r.Declaration.Output.Checkpoints = 1, nil
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	fail := func(gang string) {
		for r := range 2 {
			if err := h.s.jobs.get(market.TaskID(gang, r)).update(func(x *Record) error {
				x.State, x.Outcome, x.Attribution = api.JobReleased, ledger.OutcomeFailed, ledger.AttributionJob
				if r == 1 {
					x.Outcome, x.Attribution = ledger.OutcomeWithdrawn, ledger.AttributionSubmitter
				}
				return nil
			}); err != nil {
				t.Fatal(err)
			}
		}
	}
	fail(gang)
	if j := h.job(t, gang); j.State != api.JobQueued || !strings.Contains(j.Reason, "going on whole") {
		t.Fatalf("a gang failed with a retry left shows %s (%s), want queued, going on", j.State, j.Reason)
	}
	checkGangs(ctx, h.s, time.Now())
	j := h.job(t, gang)
	if len(j.Attempts) != 2 {
		t.Fatalf("%d attempts after a failure with a retry left, want 2", len(j.Attempts))
	}
	var second Record
	h.s.jobs.get(j.Attempts[1].ID).view(func(r *Record) { second = r.copy() })
	if second.Retries != 1 || second.Resumes != 0 {
		t.Fatalf("the second attempt counts %d retries and %d resumes, want 1 and 0", second.Retries, second.Resumes)
	}
	fail(second.ID)
	checkGangs(ctx, h.s, time.Now())
	if j := h.job(t, gang); len(j.Attempts) != 2 || !j.State.Terminal() || j.Outcome != string(ledger.OutcomeFailed) {
		t.Fatalf("retries used up: %s %s after %d attempts, want failed after 2", j.State, j.Outcome, len(j.Attempts))
	}
}

// A part that ends while another is still queued (its first proposal
// declined, say) ends the gang rather than leave it waiting for good: the
// queued part ends at once, and the gang goes on whole.
func TestGangPartEndsWhileAnotherQueued(t *testing.T) {
	h, _, provs := gangHarness(t)
	gang, _ := gangOnRecord(t, h, provs)
	ctx := context.Background()
	if err := h.s.jobs.get(market.TaskID(gang, 1)).update(func(r *Record) error {
		r.State, r.Lease = api.JobQueued, nil
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if err := h.s.jobs.get(market.TaskID(gang, 0)).update(func(r *Record) error {
		r.State, r.Outcome, r.Attribution = api.JobReleased, ledger.OutcomeFailed, ledger.AttributionProvider
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	checkGangs(ctx, h.s, time.Now())
	poll.Until(t, "the queued part to end", 10*time.Second, func() bool {
		var st api.JobState
		h.s.jobs.get(market.TaskID(gang, 1)).view(func(r *Record) { st = r.State })
		return st.Terminal()
	})
	checkGangs(ctx, h.s, time.Now())
	if j := h.job(t, gang); len(j.Attempts) != 2 {
		t.Fatalf("%d attempts, want the gang going on whole as a second", len(j.Attempts))
	}
}

// A gang's ending is read from its parts' records, with their typed
// outcomes, as its view counts them.
func TestGangEnding(t *testing.T) {
	at := time.Now()
	part := func(st api.JobState, o ledger.Outcome, ended time.Duration) *Record {
		r := &Record{State: st, Outcome: o}
		r.step(api.StepRelease, at.Add(ended))
		return r
	}
	done := part(api.JobReleased, ledger.OutcomeCompleted, 0)
	lost := part(api.JobReleased, ledger.OutcomeProviderLost, 2*time.Second)
	failed := part(api.JobReleased, ledger.OutcomeFailed, time.Second)
	stopped := part(api.JobReleased, ledger.OutcomeWithdrawn, 0)
	for _, c := range []struct {
		name    string
		parts   []*Record
		over    bool
		outcome ledger.Outcome
		rank    int
	}{
		{"a part missing", []*Record{done, nil}, false, "", 0},
		{"a part running", []*Record{done, {State: api.JobRunning}}, false, "", 0},
		{"completed", []*Record{done, done}, true, ledger.OutcomeCompleted, 0},
		{"the first to fail is the cause", []*Record{done, lost, failed, stopped}, true, ledger.OutcomeFailed, 2},
		{"withdrawn after it ran", []*Record{done, stopped}, true, ledger.OutcomeFailed, 0},
		{"withdrawn before it ran", []*Record{done, {State: api.JobWithdrawn}}, true, ledger.OutcomeWithdrawn, 0},
	} {
		e := endingOf(c.parts)
		if e.over != c.over || e.outcome != c.outcome || (e.cause != nil && e.rank != c.rank) {
			t.Errorf("%s: over %t, %q, cause at %d; want %t, %q, %d", c.name, e.over, e.outcome, e.rank, c.over, c.outcome, c.rank)
		}
	}
}

// Each gang has a run of its own, whose loop looks at the gang until it
// is over: then it notes so on the gang's record and leaves the registry,
// and the gang gets no run again.
func TestGangRunLoopEndsWithTheGang(t *testing.T) {
	h, _, provs := gangHarness(t)
	h.s.cfg.ProviderLostAfter = 40 * time.Millisecond // its loop looks every 10ms
	gang, _ := gangOnRecord(t, h, provs)
	for r := range 2 {
		if err := h.s.jobs.get(market.TaskID(gang, r)).update(func(x *Record) error {
			x.State, x.Outcome = api.JobReleased, ledger.OutcomeCompleted
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	h.s.gangs.start()
	poll.Until(t, "the gang's run to end", 10*time.Second, func() bool {
		h.s.gangs.mu.Lock()
		defer h.s.gangs.mu.Unlock()
		return len(h.s.gangs.runs) == 0
	})
	var over bool
	h.s.jobs.get(gang).view(func(r *Record) { over = r.GangOver })
	if !over {
		t.Fatal("the gang's run ended without noting the gang over")
	}
	if h.s.gangs.of(gang) != nil {
		t.Fatal("a gang over got a run again")
	}
	if err := h.s.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
}
