package rogue

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/e31network/e31/ledger"
	"github.com/e31network/e31/market"
	"github.com/e31network/e31/node/task"
	"github.com/e31network/e31/node/wire"
	"github.com/e31network/e31/p2p"
	"github.com/libp2p/go-libp2p/core/peer"
	ma "github.com/multiformats/go-multiaddr"
)

// The rogue as a submitter: it declares jobs, countersigns the proposals
// of the honest providers that take them, and then does with their
// receipts and gangs what SubmitterPolicy says.

// ReceiptPolicy is how the rogue, as a submitter, answers receipts.
type ReceiptPolicy int

// How a rogue submitter answers receipts.
const (
	// Countersign every receipt, as an honest submitter does.
	Countersign ReceiptPolicy = iota
	// Refuse every receipt at once, with no code.
	Refuse
	// Ignore every receipt: no answer until the provider gives up.
	Ignore
)

// SubmitterPolicy is how the rogue answers as a submitter (Serve).
type SubmitterPolicy struct {
	Receipts ReceiptPolicy
}

// submitting is the rogue's state as a submitter; it belongs to the Rogue
// and is guarded by its mu.
type submitting struct {
	policy SubmitterPolicy
	// declared are its jobs, by ID (a gang's, for its parts).
	declared map[string]*declared
	// leases are the leases it countersigned, by ID.
	leases map[string]*heldLease
	// proposals counts the proposals received, by job (part) ID.
	proposals map[string]int
	// changed is closed, and replaced, on every change above: the waits
	// wake on it.
	changed chan struct{}
}

// declared is one job the rogue declared.
type declared struct {
	job Job
	// accept says whether proposals for it are countersigned; a probe,
	// which only counts them, declines every one.
	accept bool
	// withdrawn: no longer re-announced.
	withdrawn bool
}

// heldLease is a lease the rogue countersigned as a submitter.
type heldLease struct {
	lease wire.SignedLease
	at    time.Time // when countersigned
	// refused and countersigned count its receipts by answer.
	refused, countersigned int
	// final is the last final receipt the provider sent, answered or not,
	// and when it came.
	final   *ledger.Receipt
	finalAt time.Time
}

// Serve makes the rogue answer as a submitter, as policy says: proposals
// for its jobs (countersigned, the first of each job or part), events,
// outputs (acknowledged unfetched), staging requests (allowed, naming no
// other source) and receipts.
func (r *Rogue) Serve(policy SubmitterPolicy) {
	r.mu.Lock()
	first := r.sub == nil
	if first {
		r.sub = &submitting{declared: map[string]*declared{}, leases: map[string]*heldLease{}, proposals: map[string]int{}, changed: make(chan struct{})}
	}
	r.sub.policy = policy
	r.mu.Unlock()
	if !first {
		return
	}
	timeout := 2 * callTimeout
	p2p.Serve(r.ctx, r.h, wire.ProtoLease, timeout, r.cfg.Log, r.handleProposal)
	p2p.Serve(r.ctx, r.h, wire.ProtoReceipt, timeout, r.cfg.Log, r.handleReceipt)
	p2p.Serve(r.ctx, r.h, wire.ProtoEvent, timeout, r.cfg.Log, func(context.Context, peer.ID, json.RawMessage) (any, error) {
		return struct{}{}, nil
	})
	p2p.Serve(r.ctx, r.h, wire.ProtoOutput, timeout, r.cfg.Log, func(context.Context, peer.ID, json.RawMessage) (any, error) {
		return struct{}{}, nil
	})
	p2p.Serve(r.ctx, r.h, wire.ProtoStage, timeout, r.cfg.Log, func(context.Context, peer.ID, json.RawMessage) (any, error) {
		return wire.StageReply{}, nil
	})
	r.wg.Go(r.requeueLoop)
}

// changedLocked wakes the waits on the submitter's state; mu is held.
func (s *submitting) changedLocked() {
	close(s.changed)
	s.changed = make(chan struct{})
}

// Declare signs and gossips a declaration of d, as a submitter's node
// does, and re-announces it while any of its jobs is unleased (views drop
// a job not re-announced). accept says whether proposals for it are
// countersigned; a probe declines them all and only counts them.
func (r *Rogue) Declare(ctx context.Context, d market.Declaration, accept bool) (Job, error) {
	r.mu.Lock()
	served := r.sub != nil
	r.mu.Unlock()
	if !served {
		return Job{}, errors.New("rogue: Declare before Serve")
	}
	body := wire.DeclarationBody{Declaration: d, Addrs: r.Addrs()}
	if err := body.Check(); err != nil {
		return Job{}, fmt.Errorf("rogue: declaration: %w", err)
	}
	s, err := r.gossip.Publish(ctx, p2p.TopicJobs, wire.KindDeclaration, body)
	if err != nil {
		return Job{}, fmt.Errorf("rogue: declare: %w", err)
	}
	j := Job{ID: wire.JobID(s), Submitter: r.self, Body: body, Envelope: s.Raw, Arrived: time.Now()}
	r.mu.Lock()
	r.sub.declared[j.ID] = &declared{job: j, accept: accept}
	r.mu.Unlock()
	return j, nil
}

// Withdraw stops re-announcing job and withdraws it, as its submitter.
func (r *Rogue) Withdraw(ctx context.Context, job string) error {
	r.mu.Lock()
	if r.sub != nil {
		if d := r.sub.declared[job]; d != nil {
			d.withdrawn = true
		}
	}
	r.mu.Unlock()
	_, err := r.gossip.Publish(ctx, p2p.TopicJobs, wire.KindWithdrawal, wire.WithdrawalBody{Job: job})
	return err
}

// parts are the IDs of a declared job's leases: the job's own, or its
// gang's parts.
func (d *declared) parts() []string {
	n := d.job.Request().Nodes
	if n < 2 {
		return []string{d.job.ID}
	}
	out := make([]string, n)
	for i := range out {
		out[i] = market.TaskID(d.job.ID, i)
	}
	return out
}

// requeueLoop re-announces, every heartbeat, the declared jobs with a job
// or part that no live lease holds, until Close.
func (r *Rogue) requeueLoop() {
	task.Every(r.ctx, r.cfg.Heartbeat, func(time.Time) {
		var envs [][]byte
		r.mu.Lock()
		for _, d := range r.sub.declared {
			if !d.withdrawn && r.sub.unleasedLocked(d) {
				envs = append(envs, d.job.Envelope)
			}
		}
		r.mu.Unlock()
		if len(envs) == 0 {
			return
		}
		if _, err := r.gossip.Publish(r.ctx, p2p.TopicJobs, wire.KindRequeue, wire.RequeueBody{Declarations: envs}); err != nil && r.ctx.Err() == nil {
			r.cfg.Log.Warn("rogue: requeue", "err", err)
		}
	})
}

// unleasedLocked reports whether some job or part of d has no live lease:
// none countersigned, or only leases whose final receipt came.
func (s *submitting) unleasedLocked(d *declared) bool {
	for _, id := range d.parts() {
		if s.liveLeaseLocked(id) == nil {
			return true
		}
	}
	return false
}

// liveLeaseLocked is job's lease not ended yet, if any.
func (s *submitting) liveLeaseLocked(job string) *heldLease {
	for _, l := range s.leases {
		if l.lease.Terms.Job == job && l.final == nil {
			return l
		}
	}
	return nil
}

// declaredOf finds the declared job that job (an ID or a part's) is of.
func (s *submitting) declaredOf(job string) *declared {
	if d := s.declared[job]; d != nil {
		return d
	}
	if gang, rank, ok := market.SplitTaskID(job); ok {
		if d := s.declared[gang]; d != nil && rank < d.job.Request().Nodes {
			return d
		}
	}
	return nil
}

// handleProposal countersigns the first proposal for each of its jobs or
// parts, as an honest submitter does, whoever made it; a probe's are
// counted and declined.
func (r *Rogue) handleProposal(ctx context.Context, from peer.ID, raw json.RawMessage) (any, error) {
	var req wire.ProposeRequest
	if err := p2p.DecodeStrict(raw, &req); err != nil {
		return nil, err
	}
	sl := req.Lease
	t := sl.Terms
	if t.Provider != from.String() || t.Submitter != r.self.String() {
		return nil, errors.New("proposal names other parties")
	}
	if err := sl.Verify(false); err != nil {
		return nil, err
	}
	r.mu.Lock()
	s := r.sub
	d := s.declaredOf(t.Job)
	if d == nil {
		r.mu.Unlock()
		return nil, p2p.Refuse(wire.CodeUnknownJob, fmt.Errorf("no job %s here", t.Job))
	}
	s.proposals[t.Job]++
	s.changedLocked()
	if !d.accept || d.withdrawn || s.liveLeaseLocked(t.Job) != nil {
		r.mu.Unlock()
		return nil, p2p.Refuse(wire.CodeNotQueued, fmt.Errorf("declined: job %s is not queued", t.Job))
	}
	if err := sl.Countersign(r.key); err != nil {
		r.mu.Unlock()
		return nil, err
	}
	s.leases[t.ID] = &heldLease{lease: sl, at: time.Now()}
	s.changedLocked()
	r.mu.Unlock()
	if _, _, task := market.SplitTaskID(t.Job); task {
		// A task's lease is its submitter's to announce.
		r.wg.Go(func() { r.announceTasks(wire.TaskBatchBody{Leases: []wire.SignedLease{sl}}) })
	}
	return wire.ProposeReply{SubmitterSig: sl.SubmitterSig}, nil
}

// announceTasks publishes a task batch, as a submitter announces its
// tasks' leases and releases.
func (r *Rogue) announceTasks(b wire.TaskBatchBody) {
	if _, err := r.gossip.Publish(r.ctx, p2p.TopicJobs, wire.KindTaskBatch, b); err != nil && r.ctx.Err() == nil {
		r.cfg.Log.Warn("rogue: announce tasks", "err", err)
	}
}

// handleReceipt answers a provider's receipt as the policy says. Every
// final receipt is kept, answered or not: it says how the provider ended
// the lease.
func (r *Rogue) handleReceipt(ctx context.Context, from peer.ID, raw json.RawMessage) (any, error) {
	var req wire.ReceiptRequest
	if err := p2p.DecodeStrict(raw, &req); err != nil {
		return nil, err
	}
	rc, err := ledger.DecodeReceipt(req.Receipt)
	if err != nil {
		return nil, err
	}
	if rc.Provider != from || rc.Submitter != r.self {
		return nil, errors.New("receipt names other parties")
	}
	r.mu.Lock()
	s := r.sub
	l := s.leases[rc.Lease]
	if l == nil {
		r.mu.Unlock()
		return nil, p2p.Refuse(wire.CodeUnknownJob, fmt.Errorf("no lease %s here", rc.Lease))
	}
	if rc.Final {
		cp := rc
		l.final, l.finalAt = &cp, time.Now()
	}
	policy := s.policy.Receipts
	if policy != Countersign {
		l.refused++
	}
	s.changedLocked()
	r.mu.Unlock()
	switch policy {
	case Refuse:
		return nil, errors.New("not signed")
	case Ignore:
		<-ctx.Done() // the stream's timeout, or Close
		return nil, ctx.Err()
	}
	if err := rc.Countersign(r.key); err != nil {
		return nil, err
	}
	r.mu.Lock()
	l.countersigned++
	s.changedLocked()
	r.mu.Unlock()
	if _, _, task := market.SplitTaskID(rc.Job); task && rc.Final {
		t := l.lease.Terms
		// The task is open again in every view, as an honest submitter
		// announces a lease given up before its run.
		r.wg.Go(func() {
			r.announceTasks(wire.TaskBatchBody{Releases: []wire.ReleaseBody{{Lease: t.ID, Job: t.Job, Provider: t.Provider, Submitter: t.Submitter,
				GPUs: t.GPUs, Outcome: rc.Outcome, Attribution: rc.Attribution, HeldMs: rc.Held().Milliseconds(),
				At: rc.HeldUntil.UnixMilli(), Requeued: rc.Phase != ledger.PhaseRun}}})
		})
	}
	return wire.ReceiptReply{Receipt: mustJSON(rc)}, nil
}

// HeldLease is what the rogue, as a submitter, knows of one lease it
// countersigned.
type HeldLease struct {
	Lease wire.SignedLease
	// Countersigned is when the rogue countersigned it.
	Countersigned time.Time
	// Refused and Signed count its receipts by the rogue's answer.
	Refused, Signed int
	// Final is the last final receipt the provider sent, nil before one;
	// FinalAt when it came.
	Final   *ledger.Receipt
	FinalAt time.Time
}

// Leases returns the leases the rogue countersigned for job (an ID or a
// part's), oldest first.
func (r *Rogue) Leases(job string) []HeldLease {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []HeldLease
	if r.sub == nil {
		return nil
	}
	for _, l := range r.sub.leases {
		if l.lease.Terms.Job == job {
			out = append(out, HeldLease{Lease: l.lease, Countersigned: l.at, Refused: l.refused, Signed: l.countersigned, Final: l.final, FinalAt: l.finalAt})
		}
	}
	sortLeases(out)
	return out
}

// Declared lists the jobs the rogue declared, first declared first.
func (r *Rogue) Declared() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.sub == nil {
		return nil
	}
	ds := slices.Collect(maps.Values(r.sub.declared))
	slices.SortFunc(ds, func(a, b *declared) int { return a.job.Arrived.Compare(b.job.Arrived) })
	out := make([]string, len(ds))
	for i, d := range ds {
		out[i] = d.job.ID
	}
	return out
}

// Proposals is how many proposals for job (an ID or a part's) came.
func (r *Rogue) Proposals(job string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.sub == nil {
		return 0
	}
	return r.sub.proposals[job]
}

// waitSubmitting waits until cond, asked under mu, holds of the rogue's
// state as a submitter, or ctx ends.
func (r *Rogue) waitSubmitting(ctx context.Context, cond func(*submitting) bool) error {
	return r.waitUnder(ctx, func() (bool, chan struct{}) {
		s := r.sub
		return cond(s), s.changed
	})
}

func mustJSON(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err) // only fixed, marshalable types reach here
	}
	return b
}

// multiaddrs parses the addresses a body gives, each ending in /p2p/ID,
// leaving out any that does not parse.
func multiaddrs(addrs []string) []ma.Multiaddr {
	var out []ma.Multiaddr
	for _, a := range addrs {
		ai, err := peer.AddrInfoFromString(a)
		if err == nil {
			out = append(out, ai.Addrs...)
		}
	}
	return out
}
