package submitter

import (
	"context"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/e31network/e31/ledger"
	"github.com/e31network/e31/node/wire"
)

// verdictTimeout bounds the sending of a verdict to one provider.
const verdictTimeout = 20 * time.Second

// settle records the verdict d on the check whose first run is t: signed
// and kept in this node's ledger, where it makes each lost lease not
// owed; sent to each provider that lost, which keeps it in its own; each
// such provider distrusted. A spot check that caught its task's provider
// runs every task that provider returned for the array again (spot.go).
func (v *verifier) settle(ctx context.Context, t *jobTracker, head Record, d Verdict) {
	signed, ok := v.sign(ctx, head.ID, d)
	d.Signed = ok
	t.change(func(r *Record) error {
		dd := d
		r.Verdict = &dd
		return nil
	})
	log := v.k.log.With("job", head.ID, "verdict", d.State, "mode", d.Mode)
	switch d.State {
	case verdictAgreed, verdictMoot:
		log.Info("replicas compared", "reason", d.Reason)
	default:
		log.Warn("replicas compared", "reason", d.Reason)
	}
	for _, r := range d.Results {
		if !r.Lost || !r.hasOutput() || r.Provider == "" || r.Provider == v.k.d.Self.String() {
			continue
		}
		v.distrust.add(ctx, r.Provider, head.ID, d.At)
		if ok {
			v.send(ctx, r.Provider, signed)
		}
	}
	// A task's provider caught: the array's next round runs again every
	// task it returned (spot.go).
	v.note(head.ID, "settled "+d.State)
}

// sign makes the ledger's verdict from d, signs it and keeps it. Only
// runs that held a lease are named (a run withdrawn while queued held
// nothing); with fewer than two there is nothing to keep.
func (v *verifier) sign(ctx context.Context, job string, d Verdict) (ledger.Verdict, bool) {
	var reps []ledger.VerdictReplica
	for _, r := range d.Results {
		p, err := peer.Decode(r.Provider)
		if r.Lease == "" || err != nil {
			continue
		}
		reps = append(reps, ledger.VerdictReplica{Lease: r.Lease, Provider: p, Output: r.Output, Compared: r.Compared})
	}
	if len(reps) < ledger.MinReplicas || len(reps) > ledger.MaxReplicas {
		return ledger.Verdict{}, false
	}
	lv := ledger.NewVerdict(job, v.k.d.Self, d.Mode, reps, d.At)
	if err := lv.Sign(v.k.d.Key); err != nil {
		v.k.log.Warn("sign verdict", "job", job, "err", err)
		return ledger.Verdict{}, false
	}
	if err := v.k.d.Ledger.KeepVerdict(ctx, lv); err != nil {
		v.k.log.Warn("keep verdict", "job", job, "err", err)
		return ledger.Verdict{}, false
	}
	return lv, true
}

// send gives a provider that lost the verdict on its lease, so that its
// ledger too shows the lease not owed. A provider that cannot be reached
// learns of it from an export; this node's ledger holds it either way.
func (v *verifier) send(ctx context.Context, provider string, lv ledger.Verdict) {
	p, err := peer.Decode(provider)
	if err != nil {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, verdictTimeout)
	defer cancel()
	raw, err := ledger.MarshalVerdict(lv)
	if err != nil {
		return
	}
	if err := v.k.d.Calls.Call(ctx, p, wire.ProtoVerdict, wire.VerdictRequest{Verdict: raw}, nil); err != nil {
		v.k.log.Warn("send verdict to the provider that lost", "job", lv.Job, "provider", provider, "err", err)
	}
}

// abandon ends a check whose compared run is gone: the runs of it not
// over are withdrawn (nothing owed for what never ran), and the verdict
// says why, naming no loser.
func (v *verifier) abandon(ctx context.Context, t *jobTracker, others []run, why string) {
	for _, r := range others {
		if !r.last.terminal() {
			if err := v.k.withdrawLast(ctx, r.t, true); err != nil {
				v.k.log.Warn("withdraw a check no longer needed", "job", t.id, "replica", r.t.id, "err", err)
			}
		}
	}
	t.change(func(rec *Record) error {
		rec.Verdict = &Verdict{State: verdictMoot, Reason: why, At: time.Now()}
		return nil
	})
	v.note(t.id, "abandoned")
}
