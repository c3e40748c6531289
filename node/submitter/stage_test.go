package submitter

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/e31network/e31/market"
	"github.com/e31network/e31/node/api"
	"github.com/e31network/e31/node/state"
	"github.com/e31network/e31/node/view"
	"github.com/e31network/e31/node/wire"
	"github.com/e31network/e31/node/wire/wiretest"
	"github.com/e31network/e31/p2p"
	"github.com/ipfs/go-cid"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/protocol"
)

// relayCalls records relay requests and refuses those to peers in refuse.
type relayCalls struct {
	mu     sync.Mutex
	got    map[peer.ID]wire.RelayRequest
	refuse map[peer.ID]bool
}

func (c *relayCalls) Call(_ context.Context, to peer.ID, proto protocol.ID, req, _ any) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if proto != wire.ProtoRelay {
		return nil
	}
	if c.refuse[to] {
		return &p2p.RemoteError{Code: wire.CodeNotHeld, Msg: "not held"}
	}
	c.got[to] = req.(wire.RelayRequest)
	return nil
}

func TestStageOnlyForTheReservedOrLeasedProvider(t *testing.T) {
	h := newHarness(t, Config{}, noOffers{})
	calls := &relayCalls{got: map[peer.ID]wire.RelayRequest{}, refuse: map[peer.ID]bool{}}
	h.s.d.Calls = calls
	now := time.Now()
	root := "bafybeibc5tpecq4aytyaz4yncnltextxha662ssunj6yysvtspqbbvhtxq"
	rootCID := mustCID(t, root)

	// A job running on h.prov that staged the root, and a queued job that
	// reads the same root.
	running := h.leasedJob(t, now)
	h.s.jobs.get(running.ID).change(func(r *Record) error {
		r.Declaration.Data = []market.Input{{Source: root, Mount: "/data"}}
		r.step(api.StepRun, now)
		return nil
	})
	d := market.NewDeclaration("q", []string{"true"}, 1, market.Hour, []market.Input{{Source: root, Mount: "/data"}})
	queued := &Record{ID: "queued-job", Declaration: d, State: api.JobQueued, Submitted: now}
	queued.step(api.StepSubmit, now)
	if err := h.records.Put(state.PrefixJob, queued.ID, queued); err != nil {
		t.Fatal(err)
	}
	if err := h.s.Recover(); err != nil {
		t.Fatal(err)
	}

	other := wiretest.FreshParty(t)
	ask := func(from peer.ID) (wire.StageReply, error) {
		raw, _ := json.Marshal(wire.StageRequest{Job: queued.ID})
		rep, err := h.s.HandleStage(context.Background(), from, raw)
		if err != nil {
			return wire.StageReply{}, err
		}
		return rep.(wire.StageReply), nil
	}

	// Not reserved: refused, and nothing allowed.
	if _, err := ask(other.ID); p2p.RefusalCode(err) != wire.CodeNotReserved {
		t.Fatalf("unreserved provider: %v, want %s", err, wire.CodeNotReserved)
	}
	if h.access.Allowed(other.ID, rootCID) {
		t.Fatal("an unreserved provider was allowed the job's data")
	}

	// Reserved by Match: allowed, and told of the provider that holds the
	// root, which was asked to serve it to the reserved one.
	h.s.RecordReservations(market.Result{Reservations: []market.Reservation{{Job: queued.ID, Provider: other.ID.String()}}})
	rep, err := ask(other.ID)
	if err != nil {
		t.Fatal(err)
	}
	if !h.access.Allowed(other.ID, rootCID) {
		t.Error("the reserved provider was not allowed the job's data")
	}
	if len(rep.Sources) != 1 || rep.Sources[0].Root != root || len(rep.Sources[0].Providers) != 1 || rep.Sources[0].Providers[0] != h.prov.ID.String() {
		t.Errorf("sources %+v, want %s from %s", rep.Sources, root, h.prov.ID)
	}
	if got := calls.got[h.prov.ID]; got.Root != root || got.To != other.ID.String() {
		t.Errorf("relay request to the holder %+v", got)
	}

	// A holder that refuses is not named.
	calls.refuse[h.prov.ID] = true
	if rep, err = ask(other.ID); err != nil || len(rep.Sources) != 0 {
		t.Errorf("with the holder refusing: %+v, %v; want no sources", rep.Sources, err)
	}

	// The reservation moves: refused again.
	h.s.RecordReservations(market.Result{})
	if _, err := ask(other.ID); p2p.RefusalCode(err) != wire.CodeNotReserved {
		t.Errorf("after the reservation moved: %v, want %s", err, wire.CodeNotReserved)
	}

	// A provider this node's Match gives the queued job (a pass between
	// epochs, as the provider's own pass did) may stage it before the
	// lease, and is not taken for a squatter meanwhile; a provider merely
	// on offer may not (it would read the inputs of any job, fit or not),
	// nor one the job avoids.
	given := wiretest.FreshParty(t)
	h.s.d.Offers = onOffer{given.ID.String(): true, other.ID.String(): true}
	h.s.d.Placement = placed{queued.ID: {given.ID.String()}}
	if _, err := ask(given.ID); err != nil {
		t.Errorf("a provider Match gave the job: %v", err)
	}
	if _, err := ask(other.ID); p2p.RefusalCode(err) != wire.CodeNotReserved {
		t.Errorf("a provider on offer that Match did not give the job: %v, want %s", err, wire.CodeNotReserved)
	}

	qj := h.s.jobs.inMemory(queued.ID)
	qj.mu.Lock()
	as := qj.assigned[given.ID.String()]
	qj.mu.Unlock()
	if as == nil || as.staging.IsZero() {
		t.Errorf("staging before the lease not recorded: %+v", as)
	}
	h.s.jobs.get(queued.ID).change(func(r *Record) error {
		r.Avoid = append(r.Avoid, given.ID.String())
		return nil
	})
	if _, err := ask(given.ID); p2p.RefusalCode(err) != wire.CodeNotReserved {
		t.Errorf("a provider the job avoids: %v, want %s", err, wire.CodeNotReserved)
	}
}

// onOffer is an offer view holding the providers set true.
type onOffer map[string]bool

// placed is a Placement that gives each job to the providers listed:
// passes on views that differ give a job to one, then another.
type placed map[string][]string

func (p placed) Assigns(job, provider string, _ time.Time) bool {
	return slices.Contains(p[job], provider)
}

func (o onOffer) Get(p string) (view.OfferEntry, bool) {
	return view.OfferEntry{LastSeen: time.Now()}, o[p]
}

func mustCID(t *testing.T, s string) cid.Cid {
	t.Helper()
	c, err := cid.Decode(s)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestStageWaitsOnlyForAnEarlierStager: of two providers leased the same
// root at once, the one that asked second is told to wait for the first,
// and the first is never told to wait for the second.
func TestStageWaitsOnlyForAnEarlierStager(t *testing.T) {
	h := newHarness(t, Config{}, noOffers{})
	root := "bafybeibc5tpecq4aytyaz4yncnltextxha662ssunj6yysvtspqbbvhtxq"
	now := time.Now()
	provs := []wiretest.Party{wiretest.FreshParty(t), wiretest.FreshParty(t)}
	h.s.d.Calls = stillStaging(provs...)
	var jobs []*Record
	for i, prov := range provs {
		l := wiretest.SignedLease(t, prov, h.sub)
		l.Terms.Job = fmt.Sprintf("job-%d", i)
		d := market.NewDeclaration("j", []string{"true"}, 1, market.Hour, []market.Input{{Source: root, Mount: "/data"}})
		r := &Record{ID: l.Terms.Job, Declaration: d, State: api.JobRenting, Lease: &l, Submitted: now}
		r.step(api.StepSubmit, now)
		r.step(api.StepRent, now)
		if err := h.records.Put(state.PrefixJob, r.ID, r); err != nil {
			t.Fatal(err)
		}
		jobs = append(jobs, r)
	}
	if err := h.s.Recover(); err != nil {
		t.Fatal(err)
	}
	ask := func(i int) wire.StageReply {
		t.Helper()
		raw, _ := json.Marshal(wire.StageRequest{Job: jobs[i].ID, Lease: jobs[i].Lease.Terms.ID})
		rep, err := h.s.HandleStage(context.Background(), provs[i].ID, raw)
		if err != nil {
			t.Fatal(err)
		}
		return rep.(wire.StageReply)
	}
	if rep := ask(0); len(rep.Staging) != 0 || len(rep.Sources) != 0 {
		t.Errorf("first to ask: %+v, want nothing to wait for", rep)
	}
	if rep := ask(1); len(rep.Staging) != 1 || rep.Staging[0].Providers[0] != provs[0].ID.String() {
		t.Errorf("second to ask: %+v, want to wait for %s", rep, provs[0].ID)
	}
	if rep := ask(0); len(rep.Staging) != 0 {
		t.Errorf("first, asking again: %+v, want nothing to wait for", rep)
	}
}

// TestStageBeforeTheLeaseIsWaitedFor: a provider staging a queued job
// before its lease is a stager like a leased one; a provider that asks
// after it for another job reading the same root is told to wait for it.
func TestStageBeforeTheLeaseIsWaitedFor(t *testing.T) {
	h := newHarness(t, Config{}, noOffers{})
	root := "bafybeibc5tpecq4aytyaz4yncnltextxha662ssunj6yysvtspqbbvhtxq"
	now := time.Now()
	provs := []wiretest.Party{wiretest.FreshParty(t), wiretest.FreshParty(t)}
	calls := stillStaging(provs...)
	h.s.d.Calls = calls
	var ids []string
	for i := range provs {
		d := market.NewDeclaration("j", []string{"true"}, 1, market.Hour, []market.Input{{Source: root, Mount: "/data"}})
		r := &Record{ID: fmt.Sprintf("job-%d", i), Declaration: d, State: api.JobQueued, Submitted: now}
		r.step(api.StepSubmit, now)
		if err := h.records.Put(state.PrefixJob, r.ID, r); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, r.ID)
	}
	if err := h.s.Recover(); err != nil {
		t.Fatal(err)
	}
	h.s.d.Offers = onOffer{provs[0].ID.String(): true, provs[1].ID.String(): true}
	h.s.d.Placement = placed{ids[0]: {provs[0].ID.String()}, ids[1]: {provs[1].ID.String()}}
	ask := func(i int) wire.StageReply {
		t.Helper()
		raw, _ := json.Marshal(wire.StageRequest{Job: ids[i]})
		rep, err := h.s.HandleStage(context.Background(), provs[i].ID, raw)
		if err != nil {
			t.Fatal(err)
		}
		return rep.(wire.StageReply)
	}
	if rep := ask(0); len(rep.Staging) != 0 {
		t.Errorf("first to stage before the lease: %+v, want nothing to wait for", rep)
	}
	if rep := ask(1); len(rep.Staging) != 1 || rep.Staging[0].Providers[0] != provs[0].ID.String() {
		t.Errorf("second: %+v, want to wait for %s", rep, provs[0].ID)
	}
	// A third provider given the first job too, by a pass that saw things
	// otherwise, waits for both rather than take a copy from the submitter.
	third := wiretest.FreshParty(t)
	calls.refuse[third.ID] = true
	h.s.d.Offers = onOffer{provs[0].ID.String(): true, provs[1].ID.String(): true, third.ID.String(): true}
	h.s.d.Placement = placed{ids[0]: {provs[0].ID.String(), third.ID.String()}, ids[1]: {provs[1].ID.String(), provs[0].ID.String()}}
	raw, _ := json.Marshal(wire.StageRequest{Job: ids[0]})
	rep, err := h.s.HandleStage(context.Background(), third.ID, raw)
	if err != nil {
		t.Fatal(err)
	}
	if got := rep.(wire.StageReply).Staging; len(got) != 1 || len(got[0].Providers) != 2 {
		t.Errorf("third, staging the first job: %+v, want to wait for both", got)
	}
	// The first provider, given the second job as well, still waits for
	// nobody: it came first for the root, and the second provider waits
	// for it, so the two never wait on each other.
	raw, _ = json.Marshal(wire.StageRequest{Job: ids[1]})
	if rep, err = h.s.HandleStage(context.Background(), provs[0].ID, raw); err != nil {
		t.Fatal(err)
	}
	if got := rep.(wire.StageReply).Staging; len(got) != 0 {
		t.Errorf("first provider, staging the second job too: %+v, want nothing to wait for", got)
	}
	if rep := ask(1); len(rep.Staging) != 1 || len(rep.Staging[0].Providers) != 1 || rep.Staging[0].Providers[0] != provs[0].ID.String() {
		t.Errorf("second provider, asking again: %+v, want to wait for %s only", rep, provs[0].ID)
	}

	// The first provider has the whole root now, though no lease of it
	// ran (its reservation went elsewhere): the second, asking again, is
	// sent to it rather than left waiting, and later askers find it a
	// holder.
	calls.mu.Lock()
	delete(calls.refuse, provs[0].ID)
	calls.mu.Unlock()
	if got := ask(1); len(got.Staging) != 0 || len(got.Sources) != 1 || len(got.Sources[0].Providers) != 1 || got.Sources[0].Providers[0] != provs[0].ID.String() {
		t.Errorf("second provider, once the first holds the root: %+v, want it as the source and nothing to wait for", got)
	}
	held := h.s.stage.holdersOf(third.ID, []cid.Cid{mustCID(t, root)}, h.s.jobs.live())
	if got := held; len(got[mustCID(t, root)]) != 1 {
		t.Errorf("holders after the first stager served: %v", got)
	}
}

// stillStaging answers relay requests as providers still fetching would:
// each of provs refuses, not holding the root yet.
func stillStaging(provs ...wiretest.Party) *relayCalls {
	c := &relayCalls{got: map[peer.ID]wire.RelayRequest{}, refuse: map[peer.ID]bool{}}
	for _, p := range provs {
		c.refuse[p.ID] = true
	}
	return c
}

// TestStageForgetsAStagerRefusedOrAvoided: a provider that staged a queued
// job before the lease, and was then refused it (its Match assignment gone)
// or avoided by it (it runs another replica, say), stops staging; the
// provider given the job next is not told to wait for it. Waiting would
// hold the job unproposed for as long as a provider waits for a stager.
func TestStageForgetsAStagerRefusedOrAvoided(t *testing.T) {
	for _, how := range []string{"refused", "avoided"} {
		t.Run(how, func(t *testing.T) {
			h := newHarness(t, Config{}, noOffers{})
			root := "bafybeibc5tpecq4aytyaz4yncnltextxha662ssunj6yysvtspqbbvhtxq"
			now := time.Now()
			provs := []wiretest.Party{wiretest.FreshParty(t), wiretest.FreshParty(t)}
			h.s.d.Calls = stillStaging(provs...)
			d := market.NewDeclaration("j", []string{"true"}, 1, market.Hour, []market.Input{{Source: root, Mount: "/data"}})
			r := &Record{ID: "job-0", Declaration: d, State: api.JobQueued, Submitted: now}
			r.step(api.StepSubmit, now)
			if err := h.records.Put(state.PrefixJob, r.ID, r); err != nil {
				t.Fatal(err)
			}
			if err := h.s.Recover(); err != nil {
				t.Fatal(err)
			}
			h.s.d.Offers = onOffer{provs[0].ID.String(): true, provs[1].ID.String(): true}
			h.s.d.Placement = placed{r.ID: {provs[0].ID.String()}}
			ask := func(i int) (wire.StageReply, error) {
				raw, _ := json.Marshal(wire.StageRequest{Job: r.ID})
				rep, err := h.s.HandleStage(context.Background(), provs[i].ID, raw)
				if err != nil {
					return wire.StageReply{}, err
				}
				return rep.(wire.StageReply), nil
			}
			if _, err := ask(0); err != nil {
				t.Fatalf("first provider, given the job: %v", err)
			}
			h.s.d.Placement = placed{r.ID: {provs[1].ID.String()}}
			switch how {
			case "refused":
				if _, err := ask(0); p2p.RefusalCode(err) != wire.CodeNotReserved {
					t.Fatalf("first provider, the job given elsewhere: %v, want refused %s", err, wire.CodeNotReserved)
				}
			case "avoided":
				h.s.jobs.get(r.ID).change(func(r *Record) error {
					r.Avoid = append(r.Avoid, provs[0].ID.String())
					return nil
				})
			}
			rep, err := ask(1)
			if err != nil {
				t.Fatalf("second provider, given the job: %v", err)
			}
			if len(rep.Staging) != 0 {
				t.Errorf("second provider: told to wait for %+v, a stager that stopped", rep.Staging)
			}
		})
	}
}
