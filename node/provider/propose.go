package provider

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"time"

	"github.com/e31network/e31/ledger"
	"github.com/e31network/e31/market"
	"github.com/e31network/e31/node/view"
	"github.com/e31network/e31/node/wire"
	"github.com/e31network/e31/p2p"
	"github.com/libp2p/go-libp2p/core/peer"
)

// Propose offers a lease for an assignment Match gave this node, unless the
// job already has a proposal in flight or one of the GPUs is held.
func (p *Provider) Propose(a market.Assignment, epoch uint64, viewHash string) {
	oj, ok := p.d.Jobs.Job(a.Job)
	if !ok || p.d.Runner == nil || !p.Takes(oj.Body.Declaration.Work) || p.Draining() {
		return // a view that has not yet heard of the drain
	}
	if !p.hours.inHours(time.Now(), time.Duration(oj.Body.Declaration.Request.Limit)*time.Millisecond, cutEvery(oj.Body.Declaration)) {
		return // a view that has not yet heard of the hours
	}
	if oj.Body.Declaration.Request.Gang() && p.d.OpenGang == nil {
		return // no gang network here to run a part in
	}
	if oj.Body.Declaration.Request.GPUs == 0 && p.cfg.NoCPUJobs {
		return // a view that has not yet heard this node takes no CPU jobs
	}
	if p.d.Misbehave != nil && !p.d.Misbehave.Propose(a.Job) {
		return
	}
	if _, struck := p.Struck(oj.Submitter.String(), time.Now()); struck {
		return // no new work for a submitter struck off (strikes.go)
	}
	if oj.Body.Declaration.Request.Gang() && p.strikes.gangStruck(oj.Submitter.String(), time.Now()) {
		return // nor gang parts for one whose gangs keep lapsing
	}
	if p.src.stagingFirst(oj) {
		return
	}
	if !p.holds.claim(a.Job, a.GPUs) {
		return
	}
	unhold := func() { p.holds.unclaim(a.Job, a.GPUs) }
	// The job's disk is held like its GPUs, after them and outside the
	// lock: two proposals racing for the last free room take turns in the
	// room, and the loser is never signed.
	if !p.disk.hold(a.Job, oj.Body.Declaration) {
		unhold()
		return
	}

	started := p.tasks.Go(func() {
		defer p.recoverPanic("proposal")
		leased := p.proposeLease(a, oj, epoch, viewHash)
		if !leased {
			// A declined or lapsed proposal frees its GPUs and its disk
			// at once.
			unhold()
			p.disk.drop(a.Job)
			return
		}
		p.holds.proposed(a.Job)
	})
	if !started {
		unhold()
		p.disk.drop(a.Job)
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
		Bound:       ledger.BoundRule,
		Price:       p.cfg.Price,
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
	secrets, err := declaredSecrets(oj.Body.Declaration.Secrets, rep.Secrets)
	if err != nil {
		p.log.Warn("the submitter's secrets do not match the declaration's; the run gets those that do", "lease", terms.ID, "err", err)
	}
	// The terms both signed bound every receipt of the lease; the ledger
	// checks each against them as it stores it.
	if err := p.d.Ledger.KeepLease(p.ctx, sl.Evidence()); err != nil {
		p.log.Warn("keep the lease's terms", "lease", terms.ID, "err", err)
	}
	rec := &Record{
		Lease:          sl,
		Declaration:    oj.Declaration(),
		SubmitterAddrs: oj.Body.Addrs,
		State:          Held,
		Start:          time.Now(),
	}
	for _, in := range oj.Body.Declaration.Data {
		rec.Inputs = append(rec.Inputs, in.Source)
	}
	// The terms name oj.Submitter, and the submitter's countersignature
	// verified against it.
	r := p.newRunner(rec, oj.Submitter)
	r.secrets = secrets
	p.disk.signed(a.Job, terms.ID, r.dir())
	// The submitter has countersigned: the lease exists whether or not this
	// write succeeds, and a failed write is logged and counted.
	r.change(func(*Record) {})
	p.holds.signed(terms)
	p.leases.add(r)
	p.d.OfferChanged()
	mb := p.d.Misbehave
	if mb != nil && !mb.Announce(terms.ID) {
		p.log.Warn("misbehaving: lease not announced", "lease", terms.ID)
	} else if taskOf(terms.Job) != "" {
		// A task's lease is announced by its submitter, with its array's
		// other leases (wire.KindTaskBatch); the submitter hears from
		// here that it was recorded.
		r.confirmTask(terms)
	} else if _, err := p.d.Gossip.Publish(p.ctx, p2p.TopicJobs, wire.KindLease, sl); err != nil {
		p.log.Warn("announce lease", "lease", terms.ID, "err", err)
	}
	p.d.Metrics.Leases.Inc()
	p.log.Info("lease signed", "lease", terms.ID, "job", a.Job, "submitter", oj.Submitter, "gpus", len(terms.GPUs))
	if mb != nil && !mb.Run(terms.ID) {
		p.log.Warn("misbehaving: the lease's run is never started", "lease", terms.ID)
		return true
	}
	p.start(r)
	return true
}

// start runs a lease's steps in the background: its runner, already in
// p.leases, goes on the task group (leaseRunner.start), stopped at once if
// the submitter withdrew the job while the lease was being signed.
func (p *Provider) start(r *leaseRunner) {
	ctx, cancel := context.WithCancelCause(p.ctx)
	t := r.arm(cancel)
	if p.leases.withdrawnBy(t.Job, t.Submitter) {
		cancel(ErrWithdrawn) // withdrawn while the lease was being signed
	}
	if cause := p.drain.preempting(time.Now()); cause != nil {
		cancel(cause) // drained quickly while the lease was being signed
	}
	r.start(ctx, cancel)
}

// newRunner makes the runner of a lease this node provides, wired to this
// role. sub is the submitter the lease's terms name, which the caller has
// decoded (or named the terms after). The caller registers the runner
// (registry.add).
func (p *Provider) newRunner(rec *Record, sub peer.ID) *leaseRunner {
	gpus := gpusByUUID(p.d.GPUs, rec.Lease.Terms.GPUs)
	lr := &leaseRunner{
		env: p.env, leaseState: leaseState{env: p.env, rec: rec},
		src: &p.src, inputs: &p.inputs, onRelease: p.released, onSettled: p.leases.settledLease,
		submitter: sub, gpus: gpus, gangStart: make(chan wire.SignedGangLease, 1),
	}
	lr.receipts = &receipts{env: p.env, lease: &lr.leaseState, submitter: sub, gpuModel: gpuModel(gpus), now: make(chan struct{}, 1)}
	return lr
}

// start runs the lease's steps in the background, on the role's task
// group: Shutdown awaits the runner there. ctx is the lease's, ended by
// cancel with a cause.
func (lr *leaseRunner) start(ctx context.Context, cancel context.CancelCauseFunc) {
	if !lr.tasks.Go(func() {
		defer cancel(nil)
		lr.run(ctx)
	}) {
		cancel(nil)
	}
}

// cutEvery is how often a job checkpoints, which lets it be cut at a
// window's close (market/window.go); 0 for a job that may not be: it
// declares no checkpoints, or is part of a gang.
func cutEvery(d market.Declaration) time.Duration {
	if cp := d.Output.Checkpoints; cp != nil && !d.Request.Gang() {
		return time.Duration(cp.Every) * time.Millisecond
	}
	return 0
}
