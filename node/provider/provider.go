package provider

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/e31network/e31/content"
	"github.com/e31network/e31/exec"
	"github.com/e31network/e31/ledger"
	"github.com/e31network/e31/market"
	"github.com/e31network/e31/node/state"
	"github.com/e31network/e31/node/task"
	"github.com/e31network/e31/node/view"
	"github.com/e31network/e31/node/wire"
	"github.com/e31network/e31/p2p"
	"github.com/ipfs/go-cid"
	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/protocol"
	"github.com/prometheus/client_golang/prometheus"
)

// What the provider needs from the rest of the node, each as small as it
// can be.
type (
	// Runner runs a job in its sandbox (exec.Runner).
	Runner interface {
		Run(ctx context.Context, s exec.Spec) (exec.Result, error)
		Cleanup(ctx context.Context, id, dir string) error
		Sweep(ctx context.Context, keep func(id string) bool) error
	}
	// Images turns an image's DAG into a root for the runner
	// (images.Library).
	Images interface {
		Pull(ctx context.Context, pinnedRef, pin string) (cid.Cid, error)
		Prepare(ctx context.Context, root cid.Cid) (*exec.ImageRoot, func(), error)
	}
	// Store is the local content store (content.Store).
	Store interface {
		Import(ctx context.Context, path string, o content.ImportOptions) (cid.Cid, int64, error)
		Export(ctx context.Context, root cid.Cid, dest string, o content.ExportOptions) error
		Unpin(ctx context.Context, root cid.Cid, reason string) error
		Pins(ctx context.Context) ([]content.Pin, error)
		GC(ctx context.Context) (int, error)
	}
	// Fetcher fetches a DAG from a peer (content.Exchange).
	Fetcher interface {
		Fetch(ctx context.Context, from peer.ID, root cid.Cid, o content.FetchOptions) (content.FetchStats, error)
		FetchFrom(ctx context.Context, sources []peer.ID, root cid.Cid, o content.FetchOptions) (content.FetchStats, error)
	}
	// Disks makes and removes the filesystem that bounds what one job
	// writes (exec.MountDisk and its kin).
	Disks interface {
		Mount(ctx context.Context, dir string, bytes uint64) (exec.Disk, error)
		Remove(dir string) error
		Sweep(root string, keep func(id string) bool) error
	}
	// Ledger stores receipts (ledger.Ledger).
	Ledger interface {
		Append(ctx context.Context, r ledger.Receipt) (ledger.Entry, error)
		AppendOneSided(ctx context.Context, r ledger.Receipt) (ledger.Entry, error)
		RecordDispute(ctx context.Context, lease string, ours, theirs ledger.Receipt) (ledger.Entry, error)
		ByLease(ctx context.Context, lease string) ([]ledger.Entry, error)
	}
	// Caller sends a request over a direct stream and reads the reply.
	Caller interface {
		Call(ctx context.Context, to peer.ID, proto protocol.ID, req, resp any) error
	}
	// Publisher publishes on a gossip topic (p2p.Gossip).
	Publisher interface {
		Publish(ctx context.Context, topic, kind string, body any) (p2p.Signed, error)
	}
	// Jobs is the market view's open jobs (view.Market).
	Jobs interface {
		Job(id string) (*view.OpenJob, bool)
		Decline(id string, by peer.ID, now time.Time)
	}
	// Access grants peers the right to fetch content (acl.List).
	Access interface {
		Allow(p peer.ID, root cid.Cid)
	}
	// Records persists lease records (state.Store).
	Records interface {
		Put(prefix, id string, v any) error
		Each(prefix string, fn func(b []byte) error) error
		Delete(prefix, id string) error
	}
	// AddrBook keeps the addresses of peers to dial.
	AddrBook interface {
		AddAddrs(p peer.ID, addrs []string)
	}
)

// Config holds the provider's settings; see node.Config for their meaning
// and defaults.
type Config struct {
	DataDir         string // lease folders go under DataDir/leases
	ProposalTTL     time.Duration
	ReceiptInterval time.Duration
	Grace           time.Duration
	OutputTimeout   time.Duration
	Retention       time.Duration
	// EventTimeout bounds telling the submitter of a step or checkpoint.
	EventTimeout time.Duration
	// ReceiptTimeout bounds one receipt exchange with the submitter.
	ReceiptTimeout time.Duration
	// ImagePull pulls an image from its registry (work.image_ref) instead
	// of fetching it from the submitter, when the declaration has one.
	ImagePull bool
	// RequireImage takes only jobs that bring their own image.
	RequireImage bool
	// MaxJobDisk caps a job's request.disk; 0: no cap.
	MaxJobDisk uint64
	// SingleSource stages inputs from the submitter alone, not also from
	// the other providers that hold them.
	SingleSource bool
	// Limits caps each input and checkpoint this node lays out (MaxBytes:
	// also what one fetch may move) and, but for MaxBytes, which is the
	// job's request.disk there, each output and checkpoint it imports.
	Limits content.Limits
	// Prestage starts fetching a job's inputs as soon as Match reserves
	// this provider for it, before the lease; and, for a job Match gives
	// it now whose inputs it lacks, fetches them before proposing the
	// lease (sources.go).
	Prestage bool
}

// Deps are the parts of the node the provider acts through.
type Deps struct {
	Key    crypto.PrivKey
	Self   peer.ID
	GPUs   []exec.GPU
	Runner Runner // nil: no sandbox, so nothing is proposed
	// Images is nil where image jobs cannot run: none is proposed.
	Images Images
	// Disks is nil where a job's writes cannot be bounded: it then
	// writes on the lease directory's filesystem, bounded by nothing.
	Disks    Disks
	Store    Store
	Fetcher  Fetcher
	Ledger   Ledger
	Calls    Caller
	Gossip   Publisher
	Jobs     Jobs
	Access   Access
	Records  Records
	AddrBook AddrBook
	Metrics  *Metrics
	Log      *slog.Logger
	// SeeGPUs asks the driver, just before a run, which GPUs the machine
	// has now, by UUID and model. Nil: the GPUs found at start.
	SeeGPUs func(ctx context.Context) []exec.GPU
	// OfferChanged is called whenever the GPUs' state changes, so that the
	// node publishes its offer at once where the lease's own announcement
	// does not say as much (node.publishOffers). It must not block.
	OfferChanged func()
	// HeldElsewhere reports whether another provider's offer lists every
	// one of roots among its holdings. Nil: none does.
	HeldElsewhere func(roots []string) bool
	// Rematch asks for a pass at once: a job this provider staged before
	// proposing its lease is ready to propose. Nil: the next epoch's pass.
	// It must not block.
	Rematch func()
	// Path says how this node is connected to a peer and, when only
	// through a relay, why (the last hole punch). Nil: always directly.
	Path func(peer.ID) (p2p.Path, string)
	// Misbehave breaks the protocol on purpose, for tests of the
	// defences; nil in every default daemon.
	Misbehave Misbehaviour
}

// Misbehaviour is how a test build makes a provider break the protocol in
// the ways a stranger might (cmd/e31d, build tag byzantine). Each method is
// asked at the point where an honest provider acts.
type Misbehaviour interface {
	// Propose reports whether to propose for a job Match assigned; false
	// squats on the assignment.
	Propose(job string) bool
	// Announce reports whether to announce a lease both sides signed.
	Announce(lease string) bool
	// Run reports whether to carry a signed lease through its run.
	Run(lease string) bool
	// Receipts reports whether to offer receipts for countersigning.
	Receipts() bool
	// Silent reports whether to stop publishing anything, offers included.
	Silent() bool
	// Model is the model the offer shows for a device of model real.
	Model(real string) string
}

// Metrics are the provider's counters, registered by the node.
type Metrics struct {
	Leases        prometheus.Counter
	Receipts      prometheus.Counter
	PersistErrors prometheus.Counter
	Staged        content.Progress
	// Prestaged counts input bytes fetched before a lease; nil: uncounted.
	Prestaged content.Progress
	// Fetched counts input bytes fetched, by the kind of source
	// ("submitter" or "provider"); nil: uncounted.
	Fetched *prometheus.CounterVec
	// Panics counts the panics recovered in leases' goroutines
	// (e31_panics_total{where="lease"}); nil: uncounted.
	Panics prometheus.Counter
}

func (m *Metrics) prestaged() content.Progress {
	if m == nil {
		return nil
	}
	return m.Prestaged
}

// ErrWithdrawn is the cause given to a lease's context when its submitter
// withdraws the job.
var ErrWithdrawn = errors.New("withdrawn by the submitter")

// ErrReleasedUnrun is the cause given to a lease's context when its
// submitter released it, tired of waiting for the run to start: the time
// is the provider's to bear (provider-lost, attribution provider).
var ErrReleasedUnrun = errors.New("released by the submitter before the run started")

// hold is what holds a GPU: a proposal in flight (lease empty) or a signed
// lease.
type hold struct {
	job   string
	lease string
}

// Provider runs the leases this node provides, from proposal to settlement.
type Provider struct {
	// Immutable after New.
	cfg Config
	d   Deps
	log *slog.Logger
	// ctx ends when Shutdown starts: runs stop, loops and retries end.
	ctx    context.Context
	cancel context.CancelFunc
	// hard ends when Shutdown's patience is spent: what was finishing
	// (importing an output, cleaning up) is abandoned too.
	hard     context.Context
	hardStop context.CancelFunc
	tasks    task.Group

	mu        sync.Mutex        // guards the fields below; never held across I/O
	held      map[string]hold   // GPU UUID -> what holds it
	proposing map[string]bool   // jobs with a proposal of ours in flight
	leases    map[string]*lease // leases not yet released
	withdrawn map[string]withdrawal

	// layouts guards laidOut, and is held across a layout's removal so
	// that no lease starts to use one being removed (laidout.go).
	layouts sync.Mutex
	// laidOut names, for each input root laid out under DataDir/inputs,
	// the leases whose runs mount it.
	laidOut map[string]map[string]bool
	// layingOut holds, for each root being exported into its layout, a
	// channel closed when that export ends.
	layingOut map[string]chan struct{}

	src sourcing // staging from many sources and before the lease
}

// withdrawal is a job's withdrawal as this provider saw it.
type withdrawal struct {
	by string
	at time.Time
}

// lease is one lease's runtime state.
type lease struct {
	// receipts serialises receipt exchanges (each links to the last). It is
	// taken before save and mu, and held while the submitter answers.
	receipts sync.Mutex
	// save orders the writes of rec: a snapshot taken later is never
	// overwritten by one taken earlier. It is taken before mu.
	save sync.Mutex
	mu   sync.Mutex // guards rec and cancel; never held across I/O
	rec  *Record
	// cancel stops the lease's work with a cause (ErrWithdrawn, or the
	// provider stopping).
	cancel context.CancelCauseFunc
	// receiptNow asks for an interim receipt at once (the run started).
	receiptNow chan struct{}
}

func newLease(rec *Record) *lease { return &lease{rec: rec, receiptNow: make(chan struct{}, 1)} }

// New returns a provider; Recover loads what a previous run left.
func New(cfg Config, d Deps) *Provider {
	ctx, cancel := context.WithCancel(context.Background())
	hard, hardStop := context.WithCancel(context.Background())
	if d.OfferChanged == nil {
		d.OfferChanged = func() {}
	}
	p := &Provider{
		cfg: cfg, d: d, log: d.Log,
		ctx: ctx, cancel: cancel, hard: hard, hardStop: hardStop,
		held:      make(map[string]hold),
		proposing: make(map[string]bool),
		leases:    make(map[string]*lease),
		withdrawn: make(map[string]withdrawal),
		laidOut:   make(map[string]map[string]bool),
		layingOut: make(map[string]chan struct{}),
	}
	// A lease's run recovers its own panics and releases (handling.go);
	// this is for every other goroutine of the provider, a lease's release
	// included.
	p.tasks.OnPanic = func(v any, stack []byte) { p.countPanic("task", v, stack) }
	return p
}

// Shutdown stops every lease and waits for their goroutines until ctx ends;
// then it abandons what is still finishing and waits for that to return.
func (p *Provider) Shutdown(ctx context.Context) error {
	p.cancel()
	err := p.tasks.Wait(ctx)
	if err != nil {
		p.log.Warn("leases still finishing at shutdown: abandoning them", "err", err)
	}
	p.hardStop()
	_ = p.tasks.Wait(context.Background())
	return err
}

// GPUs are this node's GPUs as its offer shows them. A GPU held for a
// proposal in flight still shows free: only a signed lease changes the
// offer, so that every peer's view changes once, with the lease.
func (p *Provider) GPUs() []market.GPU {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]market.GPU, 0, len(p.d.GPUs))
	for _, g := range p.d.GPUs {
		model := g.Model
		if p.d.Misbehave != nil {
			model = p.d.Misbehave.Model(model)
		}
		out = append(out, market.GPU{Index: g.Index, UUID: g.UUID, Model: model, MemoryBytes: g.MemoryBytes, Free: p.held[g.UUID].lease == ""})
	}
	return out
}

// Counts are the provider's figures for metrics.
type Counts struct {
	GPUs, Held, Leases int
}

// Counts returns how many GPUs there are, how many signed leases hold, and
// how many leases are active.
func (p *Provider) Counts() Counts {
	p.mu.Lock()
	defer p.mu.Unlock()
	c := Counts{GPUs: len(p.d.GPUs), Leases: len(p.leases)}
	for _, h := range p.held {
		if h.lease != "" {
			c.Held++
		}
	}
	return c
}

// Images reports whether this provider runs jobs in their own image: the
// Images flag of its offer.
func (p *Provider) Images() bool { return p.d.Runner != nil && p.d.Images != nil }

// Takes reports whether this provider runs the work as to its image: one
// only if it can run images, one without only if it does not require one.
// Match filters the same way from the offer; this guards against a view
// that disagrees.
func (p *Provider) Takes(w market.Work) bool {
	if w.Image != "" {
		return p.Images()
	}
	return !p.cfg.RequireImage
}

// Propose offers a lease for an assignment Match gave this node, unless the
// job already has a proposal in flight or one of the GPUs is held.
func (p *Provider) Propose(a market.Assignment, epoch uint64, viewHash string) {
	oj, ok := p.d.Jobs.Job(a.Job)
	if !ok || p.d.Runner == nil || !p.Takes(oj.Body.Declaration.Work) {
		return
	}
	if max := p.cfg.MaxJobDisk; max > 0 && oj.Body.Declaration.Request.DiskBytes() > max {
		return
	}
	if p.d.Misbehave != nil && !p.d.Misbehave.Propose(a.Job) {
		return
	}
	if p.stagingFirst(oj) {
		return
	}
	p.mu.Lock()
	if p.proposing[a.Job] {
		p.mu.Unlock()
		return
	}
	// A pass whose view does not yet hold this provider's own lease on
	// the job (an epoch's cut, taken before a pass between epochs leased
	// it) must not lease it twice.
	for _, h := range p.held {
		if h.job == a.Job {
			p.mu.Unlock()
			return
		}
	}
	for _, g := range a.GPUs {
		if _, taken := p.held[g]; taken {
			p.mu.Unlock()
			return
		}
	}
	for _, g := range a.GPUs {
		p.held[g] = hold{job: a.Job}
	}
	p.proposing[a.Job] = true
	p.mu.Unlock()

	started := p.tasks.Go(func() {
		defer p.recoverPanic("proposal")
		leased := p.proposeLease(a, oj, epoch, viewHash)
		p.mu.Lock()
		delete(p.proposing, a.Job)
		if !leased {
			// A declined or lapsed proposal frees its GPUs at once.
			for _, g := range a.GPUs {
				if h := p.held[g]; h.lease == "" && h.job == a.Job {
					delete(p.held, g)
				}
			}
		}
		p.mu.Unlock()
	})
	if !started {
		p.mu.Lock()
		delete(p.proposing, a.Job)
		for _, g := range a.GPUs {
			delete(p.held, g)
		}
		p.mu.Unlock()
	}
}

func (p *Provider) proposeLease(a market.Assignment, oj *view.OpenJob, epoch uint64, viewHash string) bool {
	now := time.Now()
	var nonce [8]byte
	_, _ = rand.Read(nonce[:])
	req := oj.Body.Declaration.Request
	terms := wire.LeaseTerms{
		ID:          wire.LeaseID(a.Job, p.d.Self.String(), now.UnixMilli(), binary.BigEndian.Uint64(nonce[:])),
		Job:         a.Job,
		Provider:    p.d.Self.String(),
		Submitter:   oj.Submitter.String(),
		GPUs:        a.GPUs,
		CPUs:        req.CPUs,
		MemoryBytes: uint64(req.Memory),
		Limit:       req.Limit,
		Proposed:    now.UnixMilli(),
		Expires:     now.Add(p.cfg.ProposalTTL).UnixMilli(),
		Epoch:       epoch,
		ViewHash:    viewHash,
		Rank:        a.Rank,
	}
	sl := wire.SignedLease{Terms: terms}
	if err := sl.SignProvider(p.d.Key); err != nil {
		p.log.Error("sign proposal", "err", err)
		return false
	}
	p.d.AddrBook.AddAddrs(oj.Submitter, oj.Body.Addrs)
	ctx, cancel := context.WithTimeout(p.ctx, p.cfg.ProposalTTL)
	defer cancel()
	var rep wire.ProposeReply
	if err := p.d.Calls.Call(ctx, oj.Submitter, wire.ProtoLease, wire.ProposeRequest{Lease: sl}, &rep); err != nil {
		p.log.Info("proposal not accepted", "job", a.Job, "err", err)
		if p2p.RefusalCode(err) == wire.CodeNotQueued {
			// The submitter's word: the job is leased or over, whatever
			// this view missed (a partition, a lost announcement), until
			// the submitter announces it queued again.
			p.d.Jobs.Decline(a.Job, oj.Submitter, time.Now())
		}
		if p2p.Unreachable(err) {
			// Nobody is there to answer (a Sybil identity declares and
			// is never reachable): out of this view until the submitter
			// announces the job again, rather than matched every pass.
			p.d.Jobs.Decline(a.Job, oj.Submitter, time.Now())
		}
		return false
	}
	sl.SubmitterSig = rep.SubmitterSig
	if err := sl.Verify(true); err != nil {
		p.log.Warn("proposal countersignature invalid", "job", a.Job, "err", err)
		return false
	}
	rec := &Record{
		Lease:          sl,
		Declaration:    oj.Body.Declaration,
		SubmitterAddrs: oj.Body.Addrs,
		State:          Held,
		Start:          time.Now(),
	}
	for _, in := range oj.Body.Declaration.Data {
		rec.Inputs = append(rec.Inputs, in.Source)
	}
	l := newLease(rec)
	// The submitter has countersigned: the lease exists whether or not this
	// write succeeds, and a failed write is logged and counted.
	p.change(l, func(*Record) {})
	p.mu.Lock()
	for _, g := range terms.GPUs {
		p.held[g] = hold{job: terms.Job, lease: terms.ID}
	}
	p.leases[terms.ID] = l
	p.mu.Unlock()
	p.d.OfferChanged()
	mb := p.d.Misbehave
	if mb != nil && !mb.Announce(terms.ID) {
		p.log.Warn("misbehaving: lease not announced", "lease", terms.ID)
	} else if _, err := p.d.Gossip.Publish(p.ctx, p2p.TopicJobs, wire.KindLease, sl); err != nil {
		p.log.Warn("announce lease", "lease", terms.ID, "err", err)
	}
	p.d.Metrics.Leases.Inc()
	p.log.Info("lease signed", "lease", terms.ID, "job", a.Job, "submitter", oj.Submitter, "gpus", len(terms.GPUs))
	if mb != nil && !mb.Run(terms.ID) {
		p.log.Warn("misbehaving: the lease's run is never started", "lease", terms.ID)
		return true
	}
	p.start(l)
	return true
}

// start runs a lease's steps in the background.
func (p *Provider) start(l *lease) {
	ctx, cancel := context.WithCancelCause(p.ctx)
	l.mu.Lock()
	l.cancel = cancel
	t := l.rec.Lease.Terms
	l.mu.Unlock()
	p.mu.Lock()
	if w, ok := p.withdrawn[t.Job]; ok && w.by == t.Submitter {
		cancel(ErrWithdrawn) // withdrawn while the lease was being signed
	}
	p.mu.Unlock()
	if !p.tasks.Go(func() {
		defer cancel(nil)
		p.run(ctx, l)
	}) {
		cancel(nil)
	}
}

// Withdraw stops the lease of a job this node provides, if any, on the
// submitter's word.
func (p *Provider) Withdraw(job string, by peer.ID) {
	p.mu.Lock()
	// Remembered too, for a lease whose run has not started yet: start
	// checks it.
	p.withdrawn[job] = withdrawal{by: by.String(), at: time.Now()}
	leases := slices.Collect(maps.Values(p.leases))
	p.mu.Unlock()
	// A lease's lock is never taken under p.mu.
	for _, l := range leases {
		l.mu.Lock()
		t := l.rec.Lease.Terms
		cancel := l.cancel
		l.mu.Unlock()
		if t.Job == job && t.Submitter == by.String() && cancel != nil {
			p.log.Info("withdrawal: stopping lease", "lease", t.ID, "job", job)
			cancel(ErrWithdrawn)
		}
	}
}

// Prune forgets withdrawals older than keep.
func (p *Provider) Prune(now time.Time, keep time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for job, w := range p.withdrawn {
		if now.Sub(w.at) > keep {
			delete(p.withdrawn, job)
		}
	}
}

func (p *Provider) leaseDir(id string) string { return filepath.Join(p.cfg.DataDir, "leases", id) }

// update changes a lease's record under its lock, then persists it outside
// the lock. Readers of the record never wait on the disk.
func (p *Provider) update(l *lease, fn func(r *Record)) error {
	l.save.Lock()
	defer l.save.Unlock()
	l.mu.Lock()
	fn(l.rec)
	snap := *l.rec
	l.mu.Unlock()
	return p.write(&snap)
}

// change is update for a change the lease goes on with whether or not it
// reaches the disk: a failed write is logged and counted (write), the
// record in memory stays this run's truth, and the next change writes it
// again whole.
func (p *Provider) change(l *lease, fn func(r *Record)) {
	p.update(l, fn) //nolint:errcheck // logged and counted by write
}

func (p *Provider) write(r *Record) error {
	if err := p.d.Records.Put(state.PrefixLease, r.ID(), r); err != nil {
		p.d.Metrics.PersistErrors.Inc()
		p.log.Error("persist lease", "lease", r.ID(), "err", err)
		return fmt.Errorf("persist lease %s: %w", r.ID(), err)
	}
	return nil
}

// snapshot copies a lease's record.
func (l *lease) snapshot() Record {
	l.mu.Lock()
	defer l.mu.Unlock()
	return *l.rec
}

// gpuModel is the model of the leased GPUs, as receipts name it.
func (p *Provider) gpuModel(uuids []string) string {
	if gs := p.gpusByUUID(uuids); len(gs) > 0 {
		return gs[0].Model
	}
	return ""
}

// seeGPUs is the provider's own check before a run: the leased GPUs as
// the driver reports them now. One it no longer reports is left out, for
// the submitter to see in the final receipt.
func (p *Provider) seeGPUs(ctx context.Context, leased []string) []ledger.GPUSeen {
	gpus := p.d.GPUs
	if p.d.SeeGPUs != nil {
		gpus = p.d.SeeGPUs(ctx)
	}
	var out []ledger.GPUSeen
	for _, u := range leased {
		for _, g := range gpus {
			if g.UUID == u {
				out = append(out, ledger.GPUSeen{UUID: g.UUID, Model: g.Model})
			}
		}
	}
	return out
}

// gpusByUUID returns this node's GPUs with these UUIDs.
func (p *Provider) gpusByUUID(uuids []string) []exec.GPU {
	var out []exec.GPU
	for _, u := range uuids {
		for _, g := range p.d.GPUs {
			if g.UUID == u {
				out = append(out, g)
			}
		}
	}
	return out
}

// StopLease stops a lease of this node whose submitter released it before
// its run began (it gave up waiting and put the job back in the queue): the
// work would be owed nothing and its output never fetched.
func (p *Provider) StopLease(id string, by peer.ID) {
	p.mu.Lock()
	l := p.leases[id]
	p.mu.Unlock()
	if l == nil {
		return
	}
	l.mu.Lock()
	t, cancel := l.rec.Lease.Terms, l.cancel
	l.mu.Unlock()
	if t.Submitter == by.String() && cancel != nil {
		p.log.Info("released by the submitter before the run: stopping lease", "lease", id, "job", t.Job)
		cancel(ErrReleasedUnrun)
	}
}

// Silent reports whether this provider, misbehaving on purpose, publishes
// nothing more (Deps.Misbehave).
func (p *Provider) Silent() bool { return p.d.Misbehave != nil && p.d.Misbehave.Silent() }
