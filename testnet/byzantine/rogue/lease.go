package rogue

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/e31network/e31/ledger"
	"github.com/e31network/e31/market"
	"github.com/e31network/e31/node/api"
	"github.com/e31network/e31/node/wire"
	"github.com/e31network/e31/p2p"
	"github.com/libp2p/go-libp2p/core/peer"
)

// Terms are what a proposal says beyond the job's own request. The zero
// value proposes as an honest provider would: now, expiring a proposal's
// lifetime from now, on free GPUs of the rogue's own offer.
type Terms struct {
	// Proposed is the proposal's time; zero: now.
	Proposed time.Time
	// Expires is when it lapses; zero: Proposed (or now, if Proposed is
	// earlier) plus the proposal's lifetime.
	Expires time.Time
	// GPUs are the UUIDs proposed; nil: the first of the offer's that
	// the job needs, or made-up ones where the rogue offers none.
	GPUs []string
}

// ErrNoAnswer says a request got no answer at all: the peer reset or
// timed out, which is not a refusal.
var ErrNoAnswer = errors.New("no answer")

// Lease is a lease the rogue proposed and its submitter countersigned.
type Lease struct {
	// Immutable after Propose.
	r         *Rogue
	Signed    wire.SignedLease
	Job       Job
	Submitter peer.ID
	// Countersigned is when the countersignature came back.
	Countersigned time.Time

	// receipts orders the lease's receipts, each continuing the last. An
	// ordering lock: held across the receipt's exchange, never under mu.
	receipts sync.Mutex
	// mu guards the chain below. A state lock.
	mu    sync.Mutex
	seq   uint64
	prev  string
	final bool
}

// Propose proposes a lease for job on terms, and returns the lease once
// countersigned; a refusal is the error, its code read with
// p2p.RefusalCode. A countersigned lease is announced on the jobs topic
// (a task's, confirmed to its submitter instead), as its provider must,
// or its submitter would take it for never announced and queue the job
// again.
func (r *Rogue) Propose(ctx context.Context, job Job, t Terms) (*Lease, error) {
	now := time.Now()
	req := job.Request()
	if t.Proposed.IsZero() {
		t.Proposed = now
	}
	if t.Expires.IsZero() {
		t.Expires = latest(t.Proposed, now).Add(r.cfg.ProposalTTL)
	}
	if t.GPUs == nil {
		t.GPUs = r.pickGPUs(req)
	}
	var nonce [8]byte
	_, _ = rand.Read(nonce[:])
	terms := wire.LeaseTerms{
		ID:          wire.LeaseID(job.ID, r.self.String(), t.Proposed.UnixMilli(), binary.BigEndian.Uint64(nonce[:])),
		Job:         job.ID,
		Provider:    r.self.String(),
		Submitter:   job.Submitter.String(),
		GPUs:        t.GPUs,
		CPUs:        req.CPUs,
		MemoryBytes: uint64(req.Memory),
		Limit:       req.Limit,
		Proposed:    t.Proposed.UnixMilli(),
		Expires:     t.Expires.UnixMilli(),
		// The epoch the proposal is made in, as a provider's Match pass
		// would name it; the view hash is the rogue's to make up.
		Epoch:    uint64(now.UnixMilli() / r.cfg.Epoch.Milliseconds()),
		ViewHash: "rogue",
		Bound:    ledger.BoundRule,
	}
	if r.cfg.Unbounded {
		terms.Bound = 0
	}
	sl := wire.SignedLease{Terms: terms}
	if err := sl.SignProvider(r.key); err != nil {
		return nil, err
	}
	r.h.Peerstore().AddAddrs(job.Submitter, multiaddrs(job.Body.Addrs), time.Hour)
	var rep wire.ProposeReply
	if err := r.call(ctx, job.Submitter, wire.ProtoLease, wire.ProposeRequest{Lease: sl}, &rep); err != nil {
		return nil, answerErr(err)
	}
	sl.SubmitterSig = rep.SubmitterSig
	if err := sl.Verify(true); err != nil {
		return nil, fmt.Errorf("rogue: countersignature of lease %s: %w", terms.ID, err)
	}
	l := &Lease{r: r, Signed: sl, Job: job, Submitter: job.Submitter, Countersigned: time.Now()}
	if err := l.announce(ctx); err != nil {
		// The lease exists all the same: what the attack does with it
		// says whether the submitter gave it up.
		r.cfg.Log.Warn("rogue: announce lease", "lease", terms.ID, "err", err)
	}
	return l, nil
}

// announce tells the network the lease exists, as its provider: the lease
// itself on the jobs topic, or for a task, whose submitter announces it,
// the rent step to the submitter.
func (l *Lease) announce(ctx context.Context) error {
	if _, _, task := market.SplitTaskID(l.Signed.Terms.Job); !task {
		if _, err := l.r.gossip.Publish(ctx, p2p.TopicJobs, wire.KindLease, l.Signed); err != nil {
			return fmt.Errorf("rogue: announce lease %s: %w", l.Signed.Terms.ID, err)
		}
	}
	return l.Event(ctx, wire.EventRequest{Step: api.StepRent, At: time.Now().UnixMilli()})
}

// pickGPUs names req.GPUs GPUs of the rogue's offer, the free ones first,
// or made-up ones where it offers none.
func (r *Rogue) pickGPUs(req market.Request) []string {
	o, _ := r.offerNow()
	var out []string
	for _, g := range o.GPUs {
		if len(out) < req.GPUs && g.Free {
			out = append(out, g.UUID)
		}
	}
	for i := len(out); i < req.GPUs; i++ {
		out = append(out, fmt.Sprintf("GPU-made-up-%d", i))
	}
	return out
}

// ID is the lease's ID.
func (l *Lease) ID() string { return l.Signed.Terms.ID }

// Proposed is the lease's start, as its terms say.
func (l *Lease) Proposed() time.Time { return time.UnixMilli(l.Signed.Terms.Proposed) }

// Limit is the job's limit, as the terms say.
func (l *Lease) Limit() time.Duration { return time.Duration(l.Signed.Terms.Limit) * time.Millisecond }

// Event sends an event of the lease (ProtoEvent); Lease and Job are
// filled in.
func (l *Lease) Event(ctx context.Context, ev wire.EventRequest) error {
	ev.Lease, ev.Job = l.ID(), l.Signed.Terms.Job
	if err := l.r.call(ctx, l.Submitter, wire.ProtoEvent, ev, nil); err != nil {
		return answerErr(err)
	}
	return nil
}

// ReceiptSpec is what a receipt claims. The zero value claims an interim
// receipt of the run phase from the lease's start until now.
type ReceiptSpec struct {
	HeldFrom, HeldUntil time.Time
	Final               bool
	// Phase is the phase claimed; empty: run.
	Phase ledger.Phase
	// What a final receipt says of the ending.
	Outcome      ledger.Outcome
	Attribution  ledger.Attribution
	ExitCode     *int
	Reason       string
	Output       string
	Checkpoint   string
	CheckpointAt time.Time
}

// Answer is how the submitter answered a receipt.
type Answer struct {
	// Receipt is the receipt sent.
	Receipt ledger.Receipt
	// Countersigned: the submitter signed it too, and the rogue holds
	// the receipt both signed.
	Countersigned bool
	// Disputed: the submitter refused it with its own record of the
	// lease (wire.ReceiptReply.Dispute).
	Disputed bool
	// Err is the refusal, or why no answer came; nil when countersigned
	// or disputed. Its code: p2p.RefusalCode.
	Err error
}

// GPUHours is what the receipt claims, in GPU-hours.
func (a Answer) GPUHours() float64 { return a.Receipt.GPUSeconds() / 3600 }

// Receipt signs a receipt of the lease that claims what spec says,
// continuing the chain the submitter countersigned so far, and sends it.
// A receipt countersigned extends the chain; one refused or disputed
// leaves it as it was.
func (l *Lease) Receipt(ctx context.Context, spec ReceiptSpec) Answer {
	l.receipts.Lock()
	defer l.receipts.Unlock()
	now := time.Now()
	if spec.HeldFrom.IsZero() {
		spec.HeldFrom = l.Proposed()
	}
	if spec.HeldUntil.IsZero() {
		spec.HeldUntil = now
	}
	if spec.Phase == "" {
		spec.Phase = ledger.PhaseRun
	}
	l.mu.Lock()
	seq, prev := l.seq, l.prev
	l.mu.Unlock()
	t := l.Signed.Terms
	rc := ledger.Receipt{
		Lease: t.ID, Job: t.Job, Provider: l.r.self, Submitter: l.Submitter, GPUs: len(t.GPUs),
		Seq: seq, Final: spec.Final, HeldFrom: spec.HeldFrom, HeldUntil: spec.HeldUntil,
		Phase: spec.Phase, Prev: prev,
	}
	if spec.Final {
		rc.Outcome, rc.Attribution, rc.ExitCode, rc.Reason = spec.Outcome, spec.Attribution, spec.ExitCode, spec.Reason
		rc.Output, rc.Checkpoint, rc.CheckpointAt = spec.Output, spec.Checkpoint, spec.CheckpointAt
		rc.Phases = ledger.Phases{Run: rc.Held().Seconds()}
	}
	a := Answer{Receipt: rc}
	if err := rc.SignProvider(l.r.key); err != nil {
		a.Err = err
		return a
	}
	a.Receipt = rc
	raw, err := json.Marshal(rc)
	if err != nil {
		a.Err = err
		return a
	}
	var rep wire.ReceiptReply
	if err := l.r.call(ctx, l.Submitter, wire.ProtoReceipt, wire.ReceiptRequest{Receipt: raw}, &rep); err != nil {
		a.Err = answerErr(err)
		return a
	}
	if len(rep.Dispute) > 0 {
		a.Disputed = true
		return a
	}
	cr, err := ledger.DecodeReceipt(rep.Receipt)
	if err != nil {
		a.Err = fmt.Errorf("rogue: countersigned receipt: %w", err)
		return a
	}
	if err := cr.Verify(); err != nil || cr.Seq != seq || cr.Lease != t.ID {
		a.Err = fmt.Errorf("rogue: the submitter countersigned another receipt (seq %d of %s): %v", cr.Seq, cr.Lease, err)
		return a
	}
	a.Receipt, a.Countersigned = cr, true
	l.mu.Lock()
	l.seq, l.prev = seq+1, cr.Digest()
	l.final = l.final || cr.Final
	l.mu.Unlock()
	return a
}

// KeepAlive signs an honest interim receipt of phase every receipt
// interval, from the lease's start until now, as a provider staging,
// waiting for its gang or running does, so that the submitter sees the
// lease held and does not give it up for silent; until ctx ends or a
// receipt is refused. It returns when it stops, with the last refusal
// (nil when ctx ended it).
func (l *Lease) KeepAlive(ctx context.Context, phase ledger.Phase) error {
	t := time.NewTicker(l.r.cfg.ReceiptInterval)
	defer t.Stop()
	for {
		a := l.Receipt(ctx, ReceiptSpec{Phase: phase})
		if !a.Countersigned {
			if ctx.Err() != nil {
				return nil
			}
			if a.Err == nil {
				a.Err = errors.New("disputed")
			}
			return a.Err
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// Release announces on the jobs topic that the lease ended and its GPUs
// are free, as its provider: every view gives them back to Match at
// once, rather than when the submitter's own announcement comes.
func (l *Lease) Release(ctx context.Context, outcome ledger.Outcome, by ledger.Attribution) error {
	t := l.Signed.Terms
	now := time.Now()
	body := wire.ReleaseBody{Lease: t.ID, Job: t.Job, Provider: t.Provider, Submitter: t.Submitter, GPUs: t.GPUs,
		Outcome: outcome, Attribution: by, At: now.UnixMilli()}
	if _, err := l.r.gossip.Publish(ctx, p2p.TopicJobs, wire.KindRelease, body); err != nil {
		return fmt.Errorf("rogue: announce the release of lease %s: %w", t.ID, err)
	}
	return nil
}

// Ended reports whether a final receipt of the lease was countersigned.
func (l *Lease) Ended() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.final
}

// answerErr marks an error that carries no answer of the peer's as such.
func answerErr(err error) error {
	var re *p2p.RemoteError
	if errors.As(err, &re) {
		return err
	}
	return fmt.Errorf("%w: %w", ErrNoAnswer, err)
}

func latest(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}
