package submitter

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/e31network/e31/node/wire"
	"github.com/e31network/e31/p2p"
	"github.com/libp2p/go-libp2p/core/peer"
)

// partLeased is a part's lease as assembly reads it.
type partLeased struct {
	lease    wire.SignedLease
	provider peer.ID
}

// leased is told that a part of the gang was leased: the last part's
// lease starts the gang (assemble), on the run's tasks.
func (r *gangRun) leased() {
	r.tasks.Go(func() { r.assemble(r.ctx) })
}

// holds reports whether a part of the gang other than job is leased, and
// not ended, on provider: no two parts share one (Match never puts them
// there, but two passes of different views might).
func (r *gangRun) holds(job, provider string) bool {
	for _, t := range r.g.members(r.id, r.n) {
		if t == nil || t.id == job {
			continue
		}
		held := false
		t.view(func(rec *Record) {
			held = rec.Lease != nil && !rec.terminal() && rec.Lease.Terms.Provider == provider
		})
		if held {
			return true
		}
	}
	return false
}

// leasedParts returns every part's lease when every part of the gang is
// leased and not ended; ok is false otherwise.
func (r *gangRun) leasedParts() ([]partLeased, bool) {
	out := make([]partLeased, r.n)
	for rank, t := range r.g.members(r.id, r.n) {
		if t == nil {
			return nil, false
		}
		var l *wire.SignedLease
		t.view(func(rec *Record) {
			if rec.Lease != nil && !rec.terminal() {
				cp := *rec.Lease
				l = &cp
			}
		})
		if l == nil {
			return nil, false
		}
		id, err := peer.Decode(l.Terms.Provider)
		if err != nil {
			return nil, false
		}
		out[rank] = partLeased{lease: *l, provider: id}
	}
	return out, true
}

// assemble starts the gang once every part is leased: it names the parts
// in one gang lease, has each provider sign it, signs it itself and hands
// it to each provider, which then starts its part. A provider that
// refuses to sign gives the gang up (giveUp), avoiding it for the part it
// held.
func (r *gangRun) assemble(ctx context.Context) {
	g := r.g.jobs.get(r.id)
	if g == nil || !r.claim() {
		return
	}
	defer r.assembled()
	var started *wire.SignedGangLease
	var over bool
	g.view(func(rec *Record) { started, over = rec.GangLease, rec.terminal() })
	n := r.n
	if over || n < 2 {
		return
	}
	parts, ok := r.leasedParts()
	if !ok {
		return
	}
	terms := wire.GangLease{Gang: r.id, Submitter: r.g.d.Self.String()}
	for rank, p := range parts {
		terms.Parts = append(terms.Parts, wire.GangPart{Rank: rank, Provider: p.provider.String(), Lease: p.lease.Terms.ID})
	}
	if started != nil && slices.Equal(started.Terms.Parts, terms.Parts) {
		return // started already under these very leases
	}
	lease := wire.SignedGangLease{Terms: terms, ProviderSigs: make([][]byte, n)}
	errs := make([]error, n)
	var wg sync.WaitGroup
	for rank, p := range parts {
		wg.Go(func() {
			var rep wire.GangReply
			errs[rank] = r.callPart(ctx, p, wire.GangRequest{Lease: p.lease.Terms.ID, Gang: wire.SignedGangLease{Terms: terms}}, &rep)
			if errs[rank] == nil {
				lease.ProviderSigs[rank] = rep.ProviderSig
				errs[rank] = lease.VerifyProvider(rank)
			}
		})
	}
	wg.Wait()
	for rank, err := range errs {
		if err != nil {
			r.g.log.Warn("a gang part's provider did not sign the gang lease", "gang", r.id, "rank", rank, "provider", parts[rank].provider, "err", err)
			// A provider that declined, signed falsely, or took the
			// request and let it lapse unsigned (squatting on the part
			// while the other parts' GPUs are held for the gang, which
			// this node owes) is avoided for the part; one that could not
			// be reached is not blamed.
			avoid := -1
			if ctx.Err() == nil && (!p2p.Unreachable(err) || errors.Is(err, wire.ErrGang)) {
				avoid = rank
			}
			r.giveUp(ctx, fmt.Sprintf("part %d's provider %s did not sign the gang lease: %v", rank, parts[rank].provider, err), avoid)
			return
		}
	}
	if err := lease.SignSubmitter(r.g.d.Key); err != nil {
		r.g.log.Error("sign gang lease", "gang", r.id, "err", err)
		return
	}
	if err := lease.Verify(); err != nil {
		r.giveUp(ctx, "the gang lease's signatures do not verify: "+err.Error(), -1)
		return
	}
	if err := g.update(func(rec *Record) error {
		rec.GangLease = &lease
		return nil
	}); err != nil {
		r.g.log.Warn("gang lease not saved", "gang", r.id, "err", err)
		return
	}
	// Parts given up while the lease was signed are not started.
	if now, ok := r.leasedParts(); !ok || !sameLeases(now, parts) {
		r.g.log.Info("gang's parts changed while its lease was signed: not started", "gang", r.id)
		return
	}
	r.sendStart(ctx, lease, parts)
	r.g.log.Info("gang started", "gang", r.id, "parts", n)
}

// sameLeases reports whether two readings of a gang's parts name the
// same leases.
func sameLeases(a, b []partLeased) bool {
	return slices.EqualFunc(a, b, func(x, y partLeased) bool { return x.lease.Terms.ID == y.lease.Terms.ID })
}

// sendStart hands every part's provider the gang lease signed by all,
// on which it starts its part. A provider that already has it takes it
// again as nothing. One that is not reached is asked again at the next
// look (check), and failing that its part ends when its wait runs out,
// which ends the gang.
func (r *gangRun) sendStart(ctx context.Context, lease wire.SignedGangLease, parts []partLeased) {
	r.started(time.Now())
	var wg sync.WaitGroup
	for rank, p := range parts {
		wg.Go(func() {
			if err := r.callPart(ctx, p, wire.GangRequest{Lease: p.lease.Terms.ID, Gang: lease, Start: true}, nil); err != nil {
				r.g.log.Warn("gang start not delivered", "gang", r.id, "rank", rank, "provider", p.provider, "err", err)
			}
		})
	}
	wg.Wait()
}

// callPart makes a gang lease's call to a part's provider. The provider
// registers its lease only once it has the countersignature, which the
// last part's is sent just before: a provider that does not know the
// lease yet is asked again, for a few seconds.
func (r *gangRun) callPart(ctx context.Context, p partLeased, req wire.GangRequest, reply any) error {
	deadline := time.Now().Add(r.g.cfg.gangCallTimeout())
	wait := 20 * time.Millisecond
	for {
		cctx, cancel := context.WithDeadline(ctx, deadline)
		err := r.g.d.Calls.Call(cctx, p.provider, wire.ProtoGang, req, reply)
		cancel()
		if err == nil || p2p.RefusalCode(err) != wire.CodeUnknownJob || time.Now().Add(wait).After(deadline) {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(wait):
		}
		wait = min(2*wait, time.Second)
	}
}

// giveUp gives up every part's lease of a gang that could not start, each
// as never run and owed by no one, and puts the whole gang back in the
// queue; avoid, unless negative, is the rank whose provider failed it,
// avoided for that part (and so, by Match, for the gang).
func (r *gangRun) giveUp(ctx context.Context, reason string, avoid int) {
	if r.g.jobs.get(r.id) == nil {
		return
	}
	now := time.Now()
	for rank, t := range r.g.members(r.id, r.n) {
		if t == nil {
			continue
		}
		var lease string
		t.view(func(rec *Record) {
			if rec.Lease != nil && !rec.terminal() {
				lease = rec.Lease.Terms.ID
			}
		})
		if lease != "" {
			t.releaseUnrun(ctx, lease, "gang "+r.id+" did not start: "+reason, now, rank == avoid)
		}
	}
	r.g.log.Info("gang given up, queued again", "gang", r.id, "why", reason)
}
