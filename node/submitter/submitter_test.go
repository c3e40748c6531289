package submitter

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/e31network/e31/content"
	"github.com/e31network/e31/ledger"
	"github.com/e31network/e31/ledger/ledgertest"
	"github.com/e31network/e31/market"
	"github.com/e31network/e31/node/acl"
	"github.com/e31network/e31/node/api"
	"github.com/e31network/e31/node/state"
	"github.com/e31network/e31/node/state/statetest"
	"github.com/e31network/e31/node/view"
	"github.com/e31network/e31/node/wire"
	"github.com/e31network/e31/node/wire/wiretest"
	"github.com/e31network/e31/p2p"
	"github.com/ipfs/go-cid"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/protocol"
	"github.com/prometheus/client_golang/prometheus"
)

// Fakes of the parts around the submitter, for tests of its own code only:
// the in-process tests in package node run it against the real ones.

// blockingLedger keeps receipts in memory; while gate is open (non-nil and
// not closed), Append waits on it.
type blockingLedger struct {
	ledgertest.Memory
	gate     chan struct{}
	entered  chan struct{}
	returned chan struct{}
}

func (l *blockingLedger) Append(ctx context.Context, r ledger.Receipt) (ledger.Entry, error) {
	if l.gate != nil {
		close(l.entered)
		<-l.gate
		defer close(l.returned)
	}
	return l.Memory.Append(ctx, r)
}

type published struct {
	kind string
	body any
}

type memGossip struct {
	mu  sync.Mutex
	out []published
	raw int
}

func (g *memGossip) Publish(ctx context.Context, topic, kind string, body any) (p2p.Signed, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.out = append(g.out, published{kind, body})
	return p2p.Signed{}, nil
}

func (g *memGossip) PublishRaw(ctx context.Context, topic string, raw []byte) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.raw++
	return nil
}

func (g *memGossip) rawCount() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.raw
}

func (g *memGossip) count(kind string) int {
	g.mu.Lock()
	defer g.mu.Unlock()
	n := 0
	for _, p := range g.out {
		if p.kind == kind {
			n++
		}
	}
	return n
}

type noOffers struct{ lastSeen time.Time }

func (o noOffers) Get(string) (view.OfferEntry, bool) {
	return view.OfferEntry{LastSeen: o.lastSeen}, !o.lastSeen.IsZero()
}

type noLeases struct{}

func (noLeases) LeaseParties(string) (string, string, bool) { return "", "", false }

type noStore struct{}

func (noStore) Import(context.Context, string, content.ImportOptions) (cid.Cid, int64, error) {
	return cid.Undef, 0, nil
}
func (noStore) Pin(context.Context, cid.Cid, string) error   { return nil }
func (noStore) Unpin(context.Context, cid.Cid, string) error { return nil }
func (noStore) Folder(context.Context, []content.FolderEntry, string) (cid.Cid, error) {
	return cid.Undef, content.ErrNotFound
}

// A store that holds nothing sizes, resolves and opens nothing.
func (noStore) Size(context.Context, cid.Cid) (int64, error) { return 0, content.ErrNotFound }
func (noStore) Resolve(context.Context, cid.Cid, string) (cid.Cid, error) {
	return cid.Undef, content.ErrNotFound
}
func (noStore) Open(context.Context, cid.Cid) (io.ReadSeekCloser, error) {
	return nil, content.ErrNotFound
}

type noCalls struct{}

func (noCalls) Call(context.Context, peer.ID, protocol.ID, any, any) error { return nil }

func testMetrics() *Metrics {
	c := func() prometheus.Counter { return prometheus.NewCounter(prometheus.CounterOpts{Name: "x"}) }
	return &Metrics{Submitted: c(), Rejected: c(), Receipts: c(), PersistErrors: c(), RoundsLost: c()}
}

type harness struct {
	s       *Submitter
	sub     wiretest.Party
	prov    wiretest.Party
	records *statetest.Records
	ledger  *blockingLedger
	gossip  *memGossip
	access  *acl.List
}

func newHarness(t testing.TB, cfg Config, offers Offers) *harness {
	t.Helper()
	h := &harness{
		sub: wiretest.FreshParty(t), prov: wiretest.FreshParty(t),
		records: &statetest.Records{},
		ledger:  &blockingLedger{},
		gossip:  &memGossip{},
		access:  acl.New(),
	}
	h.s = New(cfg, Deps{
		Key: h.sub.SK, Self: h.sub.ID, Store: noStore{}, Ledger: h.ledger, Calls: noCalls{},
		Gossip: h.gossip, Offers: offers, Leases: noLeases{}, Access: h.access, Records: h.records,
		Metrics: testMetrics(), Log: slog.New(slog.DiscardHandler), Addrs: func() []string { return nil },
	})
	return h
}

// leasedJob stores, as a previous run would have, a job running under a
// lease from h.prov, and loads it.
func (h *harness) leasedJob(t testing.TB, now time.Time) *Record {
	t.Helper()
	d := market.NewDeclaration("t", []string{"true"}, 1, market.Hour, nil)
	d.Output.Checkpoints = &market.Checkpoints{Path: "/ckpt", Every: 10 * market.Minute, Resume: market.ResumeAuto, MaxResumes: 1}
	if err := d.Validate(); err != nil {
		t.Fatal(err)
	}
	l := wiretest.SignedLease(t, h.prov, h.sub)
	l.Terms.Proposed = now.UnixMilli()
	l.Terms.GPUs = l.Terms.GPUs[:1]
	l.Terms.CPUs, l.Terms.MemoryBytes, l.Terms.Limit = d.Request.CPUs, uint64(d.Request.Memory), d.Request.Limit
	if err := l.SignProvider(h.prov.SK); err != nil {
		t.Fatal(err)
	}
	if err := l.Countersign(h.sub.SK); err != nil {
		t.Fatal(err)
	}
	r := &Record{ID: l.Terms.Job, Declaration: d, State: api.JobRunning, Lease: &l, Submitted: now}
	r.step(api.StepSubmit, now)
	r.step(api.StepRent, now)
	if err := h.records.Put(state.PrefixJob, r.ID, r); err != nil {
		t.Fatal(err)
	}
	if err := h.s.Recover(); err != nil {
		t.Fatal(err)
	}
	return r
}

func (h *harness) job(t *testing.T, id string) api.Job {
	t.Helper()
	j, err := h.s.Job(id)
	if err != nil {
		t.Fatal(err)
	}
	return j
}

// The bitswap access check and the metrics scrape answer while a receipt's
// ledger append is blocked: no lock they take is held across it.
func TestAccessAndMetricsAnswerWhileAppendBlocks(t *testing.T) {
	h := newHarness(t, Config{}, noOffers{})
	now := time.Now()
	r := h.leasedJob(t, now)
	root, _ := cid.Decode(wiretest.CID(t, "input"))
	h.access.Allow(h.prov.ID, root)
	h.ledger.gate, h.ledger.entered, h.ledger.returned = make(chan struct{}), make(chan struct{}), make(chan struct{})

	rec := ledger.Receipt{Lease: r.Lease.Terms.ID, Job: r.ID, Provider: h.prov.ID, Submitter: h.sub.ID, GPUs: 1,
		HeldFrom: now, HeldUntil: now.Add(time.Second), Phase: ledger.PhaseRun}
	if err := rec.SignProvider(h.prov.SK); err != nil {
		t.Fatal(err)
	}
	raw, _ := json.Marshal(wire.ReceiptRequest{Receipt: mustJSON(rec)})
	handled := make(chan error, 1)
	go func() {
		_, err := h.s.HandleReceipt(context.Background(), h.prov.ID, raw)
		handled <- err
	}()
	<-h.ledger.entered

	answered := make(chan struct{})
	go func() {
		defer close(answered)
		if !h.access.Allowed(h.prov.ID, root) {
			t.Error("access check refused a granted fetch")
		}
		if c := h.s.Counts(); c[api.JobRunning] != 1 {
			t.Errorf("counts %v, want one running job", c)
		}
		if js := h.s.Jobs(); len(js) != 1 {
			t.Errorf("%d jobs listed", len(js))
		}
	}()
	select {
	case <-answered:
	case <-time.After(10 * time.Second):
		t.Fatal("the access check or the metrics waited on the blocked ledger append")
	}
	select {
	case <-h.ledger.returned:
		t.Fatal("the append was not blocked while they answered")
	default:
	}
	close(h.ledger.gate)
	if err := <-handled; err != nil {
		t.Fatalf("receipt: %v", err)
	}
}

// BenchmarkAccessWhileAppendBlocks measures the access check while a
// ledger append is held up.
func BenchmarkAccessWhileAppendBlocks(b *testing.B) {
	h := newHarness(b, Config{}, noOffers{})
	now := time.Now()
	r := h.leasedJob(b, now)
	root, _ := cid.Decode(wiretest.CID(b, "input"))
	h.access.Allow(h.prov.ID, root)
	h.ledger.gate, h.ledger.entered, h.ledger.returned = make(chan struct{}), make(chan struct{}), make(chan struct{})
	rec := ledger.Receipt{Lease: r.Lease.Terms.ID, Job: r.ID, Provider: h.prov.ID, Submitter: h.sub.ID, GPUs: 1,
		HeldFrom: now, HeldUntil: now.Add(time.Second), Phase: ledger.PhaseRun}
	_ = rec.SignProvider(h.prov.SK)
	raw, _ := json.Marshal(wire.ReceiptRequest{Receipt: mustJSON(rec)})
	go func() { _, _ = h.s.HandleReceipt(context.Background(), h.prov.ID, raw) }()
	<-h.ledger.entered
	b.ResetTimer()
	for b.Loop() {
		if !h.access.Allowed(h.prov.ID, root) {
			b.Fatal("refused")
		}
		_ = h.s.Counts()
	}
	b.StopTimer()
	close(h.ledger.gate)
	<-h.ledger.returned
}

// A provider silent for ProviderLostAfter loses its lease: the job is
// released provider-lost, the release is announced, and a job declared
// with resume: auto is submitted again.
func TestWatchEndsASilentProvidersLease(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		h := newHarness(t, Config{ProviderLostAfter: 30 * time.Second, RequeueEvery: time.Hour}, noOffers{lastSeen: start})
		r := h.leasedJob(t, start)
		h.s.Joined(start)
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { defer close(done); h.s.watchProviders(ctx) }()

		time.Sleep(29 * time.Second)
		synctest.Wait()
		if j := h.job(t, r.ID); j.State != api.JobRunning {
			t.Fatalf("after 29s of silence the job is %s", j.State)
		}
		time.Sleep(3 * time.Second)
		synctest.Wait()
		j := h.job(t, r.ID)
		if len(j.Attempts) != 2 {
			t.Fatalf("after 32s of silence the job has %d attempts: %+v", len(j.Attempts), j.Attempts)
		}
		if a := j.Attempts[0]; a.State != api.JobReleased || a.Outcome != string(ledger.OutcomeProviderLost) || a.Attribution != string(ledger.AttributionProvider) {
			t.Fatalf("after 32s of silence the first attempt is %s %s/%s", a.State, a.Outcome, a.Attribution)
		}
		// The job goes on as its resumption, under the ID it was submitted
		// with.
		if a := j.Attempts[1]; j.State != api.JobQueued || a.State != api.JobQueued || j.ID != r.ID || a.ID == r.ID {
			t.Fatalf("after 32s of silence the job is %s, its second attempt %+v", j.State, a)
		}
		if own := h.job(t, j.Attempts[1].ID); own.Root != r.ID || own.ResumeOf != r.ID {
			t.Fatalf("the second attempt by its own ID: root %q, resume of %q", own.Root, own.ResumeOf)
		}
		if n := h.gossip.count(wire.KindRelease); n != 1 {
			t.Fatalf("%d releases announced", n)
		}
		// Before any receipt, the lease still ends in a record: this side's
		// own, held until the provider was last heard from.
		oneSided := h.ledger.OneSided()
		if len(oneSided) != 1 {
			t.Fatalf("%d one-sided records", len(oneSided))
		}
		if rec := oneSided[0]; rec.Signer != ledger.SignerSubmitter || rec.Outcome != ledger.OutcomeProviderLost || !rec.HeldUntil.Equal(start) || rec.Verify() != nil {
			t.Fatalf("one-sided record %+v (verify %v)", rec, rec.Verify())
		}
		if jobs := h.s.Jobs(); len(jobs) != 1 || jobs[0].ID != r.ID || len(jobs[0].Attempts) != 2 {
			t.Fatalf("the list does not show one job with two attempts: %+v", jobs)
		}
		cancel()
		<-done
	})
}

// Queued jobs are re-announced every RequeueEvery, and a lease that the
// network never heard of puts its job back in the queue.
func TestRequeueLoops(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		cfg := Config{ProposalTTL: 10 * time.Second, Heartbeat: 10 * time.Second, ProviderLostAfter: time.Hour, RequeueEvery: 30 * time.Second}
		h := newHarness(t, cfg, noOffers{lastSeen: start})
		r := h.leasedJob(t, start)
		// Countersigned, never announced, never receipted.
		if err := h.s.jobs.get(r.ID).update(func(r *Record) error { r.State = api.JobRenting; return nil }); err != nil {
			t.Fatal(err)
		}
		h.s.Joined(start)
		ctx, cancel := context.WithCancel(context.Background())
		var wg sync.WaitGroup
		wg.Go(func() { h.s.watchProviders(ctx) })
		wg.Go(func() { h.s.requeueLoop(ctx) })

		time.Sleep(45 * time.Second) // under 2·TTL + 3·heartbeat = 50s
		synctest.Wait()
		if j := h.job(t, r.ID); j.State != api.JobRenting {
			t.Fatalf("requeued after 45s: %s", j.State)
		}
		if n := h.gossip.count(wire.KindRequeue); n != 0 {
			t.Fatalf("%d requeues of a renting job", n)
		}
		time.Sleep(10 * time.Second)
		synctest.Wait()
		j := h.job(t, r.ID)
		if j.State != api.JobQueued || j.Lease != "" || len(j.Steps) != 1 {
			t.Fatalf("after 55s: %s, lease %q, steps %v", j.State, j.Lease, j.Steps)
		}
		time.Sleep(60 * time.Second) // two requeue ticks at 60s and 90s
		synctest.Wait()
		if n := h.gossip.count(wire.KindRequeue); n != 2 {
			t.Fatalf("%d requeues in two intervals, want 2", n)
		}
		cancel()
		wg.Wait()
	})
}
