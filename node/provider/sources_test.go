package provider

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/e31network/e31/content"
	"github.com/e31network/e31/exec"
	"github.com/e31network/e31/ledger/ledgertest"
	"github.com/e31network/e31/market"
	"github.com/e31network/e31/node/acl"
	"github.com/e31network/e31/node/state"
	"github.com/e31network/e31/node/state/statetest"
	"github.com/e31network/e31/node/view"
	"github.com/e31network/e31/node/wire"
	"github.com/e31network/e31/node/wire/wiretest"
	"github.com/e31network/e31/p2p"
	"github.com/ipfs/go-cid"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/protocol"
)

const testRoot = "bafybeibc5tpecq4aytyaz4yncnltextxha662ssunj6yysvtspqbbvhtxq"

// sourceFetcher records the sources of each fetch, fallbacks last; with block set, a fetch
// waits for its context to end; with release set, a fetch says it started
// and waits for release to close.
type sourceFetcher struct {
	mu      sync.Mutex
	sources [][]peer.ID
	block   bool
	started chan struct{}
	ended   chan error
	release chan struct{}
}

// fetches is how many fetches began.
func (f *sourceFetcher) fetches() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.sources)
}

// jobReadingTestRoot is job-1 of submitter sub, whose one input is
// testRoot.
func jobReadingTestRoot(sub peer.ID) *view.OpenJob {
	d := market.NewDeclaration("j", []string{"true"}, 1, market.Hour, []market.Input{{Source: testRoot, Mount: "/data"}})
	return &view.OpenJob{ID: "job-1", Submitter: sub, Body: wire.DeclarationBody{Declaration: d}}
}

func (f *sourceFetcher) Fetch(ctx context.Context, from peer.ID, root cid.Cid, o content.FetchOptions) (content.FetchStats, error) {
	return f.FetchFrom(ctx, []peer.ID{from}, root, o)
}

func (f *sourceFetcher) FetchFrom(ctx context.Context, sources []peer.ID, root cid.Cid, o content.FetchOptions) (content.FetchStats, error) {
	f.mu.Lock()
	f.sources = append(f.sources, append(slices.Clone(sources), o.Fallback...))
	f.mu.Unlock()
	if f.release != nil {
		f.started <- struct{}{}
		<-f.release
		return content.FetchStats{}, nil
	}
	if f.block {
		f.started <- struct{}{}
		<-ctx.Done()
		f.ended <- ctx.Err()
		return content.FetchStats{}, ctx.Err()
	}
	return content.FetchStats{}, nil
}

// stageCaller answers staging requests naming holder as a source of
// testRoot, or refuses them.
type stageCaller struct {
	holder peer.ID
	refuse bool
}

func (c stageCaller) Call(_ context.Context, _ peer.ID, proto protocol.ID, _, resp any) error {
	if proto != wire.ProtoStage {
		return nil
	}
	if c.refuse {
		return &p2p.RemoteError{Code: wire.CodeNotReserved, Msg: "not reserved"}
	}
	*resp.(*wire.StageReply) = wire.StageReply{Sources: []wire.RootSources{{Root: testRoot, Providers: []string{c.holder.String()}}}}
	return nil
}

type oneJob struct{ j *view.OpenJob }

func (o oneJob) Job(id string) (*view.OpenJob, bool) {
	if o.j != nil && o.j.ID == id {
		return o.j, true
	}
	return nil, false
}
func (oneJob) Decline(string, peer.ID, time.Time) {}

func sourcesProvider(t *testing.T, cfg Config, f *sourceFetcher, calls Caller, jobs Jobs) (*Provider, *acl.List) {
	t.Helper()
	self := wiretest.FreshParty(t)
	p := newTestProvider(t, self, cfg, calls, nil, nil, nil)
	access := acl.New()
	p.d.Fetcher, p.d.Access, p.d.Jobs = f, access, jobs
	t.Cleanup(func() { _ = p.Shutdown(context.Background()) })
	return p, access
}

func TestStagingAsksEverySourceAndRelaysOnlyForItsSubmitter(t *testing.T) {
	sub, holder, next, stranger := wiretest.FreshParty(t), wiretest.FreshParty(t), wiretest.FreshParty(t), wiretest.FreshParty(t)
	root, _ := cid.Decode(testRoot)
	relay := func(p *Provider, from peer.ID) error {
		raw, _ := json.Marshal(wire.RelayRequest{Root: testRoot, To: next.ID.String()})
		_, err := p.HandleRelay(context.Background(), from, raw)
		return err
	}

	f := &sourceFetcher{}
	p, access := sourcesProvider(t, Config{}, f, stageCaller{holder: holder.ID}, oneJob{})
	if err := relay(p, sub.ID); p2p.RefusalCode(err) != wire.CodeNotHeld {
		t.Fatalf("relay before staging: %v, want %s", err, wire.CodeNotHeld)
	}
	if _, err := p.src.fetchStaged(context.Background(), "job", "lease", sub.ID, root, content.FetchOptions{}); err != nil {
		t.Fatal(err)
	}
	if got := f.sources[0]; len(got) != 2 || got[0] != holder.ID || got[1] != sub.ID {
		t.Errorf("sources %v, want the holder the submitter named, then the submitter as fallback", got)
	}
	// Another lease reading the same data, held here now, asks nobody.
	if _, err := p.src.fetchStaged(context.Background(), "job2", "lease2", sub.ID, root, content.FetchOptions{}); err != nil {
		t.Fatal(err)
	}
	if got := f.sources[1]; len(got) != 1 || got[0] != sub.ID {
		t.Errorf("data held here: sources %v, want only the submitter as fallback", got)
	}
	if err := relay(p, stranger.ID); p2p.RefusalCode(err) != wire.CodeNotHeld || access.Allowed(next.ID, root) {
		t.Errorf("relay asked by another submitter: %v, allowed %v; want refused", err, access.Allowed(next.ID, root))
	}
	if err := relay(p, sub.ID); err != nil || !access.Allowed(next.ID, root) {
		t.Errorf("relay asked by the submitter: %v, allowed %v", err, access.Allowed(next.ID, root))
	}

	// One source only: the submitter's list is not used.
	f = &sourceFetcher{}
	p, _ = sourcesProvider(t, Config{SingleSource: true}, f, stageCaller{holder: holder.ID}, oneJob{})
	if _, err := p.src.fetchStaged(context.Background(), "job", "lease", sub.ID, root, content.FetchOptions{}); err != nil {
		t.Fatal(err)
	}
	if got := f.sources[0]; len(got) != 1 || got[0] != sub.ID {
		t.Errorf("single source: sources %v", got)
	}

	// Leased, the submitter refusing the question is no reason not to
	// stage from it; before the lease it is.
	f = &sourceFetcher{}
	p, _ = sourcesProvider(t, Config{}, f, stageCaller{refuse: true}, oneJob{})
	if _, err := p.src.fetchStaged(context.Background(), "job", "lease", sub.ID, root, content.FetchOptions{}); err != nil || len(f.sources) != 1 {
		t.Errorf("leased, submitter refusing: %v, fetches %v", err, f.sources)
	}
	f = &sourceFetcher{}
	p, _ = sourcesProvider(t, Config{}, f, stageCaller{refuse: true}, oneJob{})
	if _, err := p.src.fetchStaged(context.Background(), "job", "", sub.ID, root, content.FetchOptions{}); p2p.RefusalCode(err) != wire.CodeNotReserved || len(f.sources) != 0 {
		t.Errorf("not leased, submitter refusing: %v, fetches %v", err, f.sources)
	}
}

func TestPrestageStopsWhenTheReservationMoves(t *testing.T) {
	sub, holder := wiretest.FreshParty(t), wiretest.FreshParty(t)
	job := jobReadingTestRoot(sub.ID)
	f := &sourceFetcher{block: true, started: make(chan struct{}, 1), ended: make(chan error, 1)}
	p, _ := sourcesProvider(t, Config{Prestage: true}, f, stageCaller{holder: holder.ID}, oneJob{job})

	p.Prestage([]Reserved{{Job: job.ID, Submitter: sub.ID}})
	select {
	case <-f.started:
	case <-time.After(10 * time.Second):
		t.Fatal("no fetch started for the reserved job")
	}
	// Still reserved: the fetch goes on, and no second one starts.
	p.Prestage([]Reserved{{Job: job.ID, Submitter: sub.ID}})
	p.Prestage(nil)
	select {
	case err := <-f.ended:
		if err == nil {
			t.Error("fetch ended without its context ending")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the fetch went on after the reservation moved")
	}
	n := f.fetches()
	if n != 1 {
		t.Errorf("%d fetches, want 1", n)
	}
}

// TestRelaysAfterRestart: inputs a lease staged before a restart may be
// relayed after it, for that lease's submitter only.
func TestRelaysAfterRestart(t *testing.T) {
	self, next := wiretest.FreshParty(t), wiretest.FreshParty(t)
	records := &statetest.Records{}
	p := newTestProvider(t, self, Config{}, stageCaller{}, &unpins{}, records, &ledgertest.Memory{})
	l := releasedLease(t, p, self, time.Now())
	l.rec.RunStart = l.rec.Start.Add(time.Second)
	l.rec.Declaration.Data = []market.Input{{Source: testRoot, Mount: "/data"}}
	if err := records.Put(state.PrefixLease, l.rec.ID(), l.rec); err != nil {
		t.Fatal(err)
	}
	access := acl.New()
	p.d.Access = access
	if err := p.Recover(context.Background()); err != nil {
		t.Fatal(err)
	}
	sub, _ := peer.Decode(l.rec.Lease.Terms.Submitter)
	raw, _ := json.Marshal(wire.RelayRequest{Root: testRoot, To: next.ID.String()})
	if _, err := p.HandleRelay(context.Background(), next.ID, raw); p2p.RefusalCode(err) != wire.CodeNotHeld {
		t.Errorf("relay asked by a stranger after restart: %v, want %s", err, wire.CodeNotHeld)
	}
	root, _ := cid.Decode(testRoot)
	if _, err := p.HandleRelay(context.Background(), sub, raw); err != nil || !access.Allowed(next.ID, root) {
		t.Errorf("relay asked by the submitter after restart: %v, allowed %v", err, access.Allowed(next.ID, root))
	}
}

// proposals answers staging requests as stageCaller does, and counts the
// lease proposals, declining each.
type proposals struct {
	stageCaller
	mu    sync.Mutex
	sent  int
	moved chan struct{}
}

func (c *proposals) Call(ctx context.Context, to peer.ID, proto protocol.ID, req, resp any) error {
	if proto != wire.ProtoLease {
		return c.stageCaller.Call(ctx, to, proto, req, resp)
	}
	c.mu.Lock()
	c.sent++
	c.mu.Unlock()
	c.moved <- struct{}{}
	return &p2p.RemoteError{Code: wire.CodeUnknownJob, Msg: "declined in this test"}
}

func (c *proposals) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.sent
}

type noAddrs struct{}

func (noAddrs) AddAddrs(peer.ID, []string) {}

type idleRunner struct{}

func (idleRunner) Run(context.Context, exec.Spec) (exec.Result, error) { return exec.Result{}, nil }
func (idleRunner) Cleanup(context.Context, string, string) error       { return nil }
func (idleRunner) Sweep(context.Context, func(string) bool) error      { return nil }

// A job Match gives a provider that lacks its inputs is staged, and laid
// out, before its lease is proposed: no proposal goes out while the inputs
// arrive, however many passes give it the job; once they are here a pass
// is asked for and the proposal goes. Where the submitter refuses staging
// before the lease, the proposal goes at once after the refusal.
func TestProposalWaitsForItsInputs(t *testing.T) {
	for _, refuse := range []bool{false, true} {
		sub, holder := wiretest.FreshParty(t), wiretest.FreshParty(t)
		job := jobReadingTestRoot(sub.ID)
		f := &sourceFetcher{started: make(chan struct{}, 1), release: make(chan struct{})}
		calls := &proposals{stageCaller: stageCaller{holder: holder.ID, refuse: refuse}, moved: make(chan struct{}, 4)}
		p, _ := sourcesProvider(t, Config{Prestage: true, DataDir: t.TempDir(), ProposalTTL: time.Second}, f, calls, oneJob{job})
		p.d.Store, p.d.Runner, p.d.AddrBook = &exports{}, idleRunner{}, noAddrs{}
		rematch := make(chan struct{}, 1)
		p.d.Rematch = func() { rematch <- struct{}{} }
		a := market.Assignment{Job: job.ID, Provider: p.d.Self.String(), GPUs: []string{"GPU-0"}}

		p.Propose(a, 1, "view")
		if !refuse {
			select {
			case <-f.started:
			case <-time.After(10 * time.Second):
				t.Fatal("no fetch started for the job before its proposal")
			}
			p.Propose(a, 2, "view") // another pass while the inputs arrive
			if n := calls.count(); n != 0 {
				t.Fatalf("%d proposals while the inputs were still arriving", n)
			}
			close(f.release)
		}
		select {
		case <-rematch:
		case <-time.After(10 * time.Second):
			t.Fatalf("refuse=%v: no pass asked for once staging ended", refuse)
		}
		p.Propose(a, 3, "view")
		select {
		case <-calls.moved:
		case <-time.After(10 * time.Second):
			t.Fatalf("refuse=%v: no proposal after staging ended", refuse)
		}
		_, err := os.Stat(filepath.Join(p.inputs.inputsDir(), testRoot))
		if laid := err == nil; laid == refuse {
			t.Errorf("refuse=%v: input laid out before the lease: %v", refuse, laid)
		}
	}
}

// Where another provider already holds a job's data, the job is proposed
// at once, not staged here first: Match moves it to the holder as soon as
// that has room, which would leave staging here for nothing.
func TestHeldElsewhereProposesAtOnce(t *testing.T) {
	sub, holder := wiretest.FreshParty(t), wiretest.FreshParty(t)
	job := jobReadingTestRoot(sub.ID)
	f := &sourceFetcher{}
	calls := &proposals{stageCaller: stageCaller{holder: holder.ID}, moved: make(chan struct{}, 4)}
	p, _ := sourcesProvider(t, Config{Prestage: true, DataDir: t.TempDir(), ProposalTTL: time.Second}, f, calls, oneJob{job})
	p.d.Store, p.d.Runner, p.d.AddrBook = &exports{}, idleRunner{}, noAddrs{}
	var asked []string
	p.d.HeldElsewhere = func(roots []string) bool { asked = roots; return true }
	p.Propose(market.Assignment{Job: job.ID, Provider: p.d.Self.String(), GPUs: []string{"GPU-0"}}, 1, "view")
	select {
	case <-calls.moved:
	case <-time.After(10 * time.Second):
		t.Fatal("no proposal for a job whose data another provider holds")
	}
	if len(asked) != 1 || asked[0] != testRoot {
		t.Errorf("asked who holds %v, want [%s]", asked, testRoot)
	}
	n := f.fetches()
	if n != 0 {
		t.Errorf("%d fetches before the proposal, want none", n)
	}
}

// A reserved job whose data another provider holds is not fetched here
// before its lease: it is likely to go to the holder.
func TestPrestageSkipsDataHeldElsewhere(t *testing.T) {
	sub, holder := wiretest.FreshParty(t), wiretest.FreshParty(t)
	job := jobReadingTestRoot(sub.ID)
	f := &sourceFetcher{block: true, started: make(chan struct{}, 1), ended: make(chan error, 1)}
	p, _ := sourcesProvider(t, Config{Prestage: true}, f, stageCaller{holder: holder.ID}, oneJob{job})
	held := true
	p.d.HeldElsewhere = func([]string) bool { return held }
	reserved := []Reserved{{Job: job.ID, Submitter: sub.ID}}
	staging := func() bool {
		p.src.mu.Lock()
		defer p.src.mu.Unlock()
		_, ok := p.src.pre[job.ID]
		return ok
	}
	p.Prestage(reserved)
	if staging() {
		t.Fatal("staging a reserved job whose data another provider holds")
	}
	held = false
	p.Prestage(reserved)
	if !staging() {
		t.Fatal("not staging a reserved job that nobody holds the data of")
	}
}

// A fetch before the lease is one of the provider's tasks: Shutdown stops it
// and returns only once it has.
func TestShutdownWaitsForAFetchBeforeTheLease(t *testing.T) {
	sub, holder := wiretest.FreshParty(t), wiretest.FreshParty(t)
	job := jobReadingTestRoot(sub.ID)
	f := &sourceFetcher{block: true, started: make(chan struct{}, 1), ended: make(chan error, 1)}
	p, _ := sourcesProvider(t, Config{Prestage: true}, f, stageCaller{holder: holder.ID}, oneJob{job})
	p.Prestage([]Reserved{{Job: job.ID, Submitter: sub.ID}})
	select {
	case <-f.started:
	case <-time.After(10 * time.Second):
		t.Fatal("no fetch started for the reserved job")
	}
	if err := p.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	select {
	case <-f.ended:
	default:
		t.Fatal("Shutdown returned while the fetch before the lease was still running")
	}
}
