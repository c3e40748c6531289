package provider

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"

	"github.com/e31network/e31/node/gangnet"
	"github.com/e31network/e31/node/state"
	"github.com/ipfs/go-cid"
	"github.com/libp2p/go-libp2p/core/peer"
)

// Recover loads the leases a previous run of this node left, so that a
// restart forgets nothing: their GPUs stay held until Resume settles them,
// and their submitters may still fetch their outputs and checkpoints.
func (p *Provider) Recover(ctx context.Context) error {
	if err := p.drain.recover(); err != nil {
		return err
	}
	if err := p.strikes.recover(); err != nil {
		return err
	}
	var recs []*Record
	err := p.d.Records.Each(state.PrefixLease, func(b []byte) error {
		var rec Record
		if err := json.Unmarshal(b, &rec); err != nil {
			return fmt.Errorf("lease record: %w", err)
		}
		recs = append(recs, &rec)
		return nil
	})
	if err != nil {
		return err
	}
	for _, rec := range recs {
		// The submitter was checked when the lease was signed; a record
		// whose submitter does not decode was damaged since, and no one
		// could be told of it or settled with: it is left out.
		sub, err := peer.Decode(rec.Lease.Terms.Submitter)
		if err != nil {
			p.log.Warn("lease record names a bad submitter; left out", "lease", rec.ID(), "err", err)
			continue
		}
		for _, s := range []string{rec.Output, rec.Checkpoint} {
			if c, err := cid.Decode(s); err == nil {
				p.d.Access.Allow(sub, c)
			}
		}
		if !rec.RunStart.IsZero() {
			// Its inputs were staged whole and stay pinned while the
			// record lasts: this node may relay them again.
			for _, in := range rec.Declaration.Data {
				if c, err := cid.Decode(in.Source); err == nil {
					p.src.held(sub, c)
				}
			}
		}
		if rec.State == Released && rec.FinalSigned {
			continue
		}
		// The ledger is written before the record: after a crash between
		// the two, the chain goes on from what the ledger holds.
		if es, err := p.d.Ledger.ByLease(ctx, rec.ID()); err == nil && uint64(len(es)) > rec.Seq {
			last := es[len(es)-1].Receipt
			rec.Seq, rec.Prev, rec.FinalSigned = uint64(len(es)), last.Digest(), last.Final
			rec.LastAlive = latest(rec.LastAlive, last.HeldUntil)
			if rec.FinalSigned && rec.State == Released {
				continue
			}
		}
		p.leases.add(p.newRunner(rec, sub))
		if rec.State != Released {
			p.holds.signed(rec.Lease.Terms)
		}
	}
	return nil
}

// Resume settles, in the background, the leases a previous run of this node
// left open. A provider that restarts mid-run does not re-adopt the
// container: it cannot tell what the job did while nobody watched, so it
// kills it, ends the lease as provider-lost (the provider's fault) and
// frees the GPUs. The submitter keeps the last checkpoint it pulled and can
// resume from it. A lease whose content this node was parsing when it
// stopped ends failed instead, so that it is not resumed on the next
// provider to stop that one too (endInterrupted).
func (p *Provider) Resume() {
	p.tasks.Go(func() { p.resume(p.ctx) })
	p.tasks.Go(func() { p.retention.loop(p.ctx) })
	p.tasks.Go(p.retention.watchDisk)
	if p.cfg.Hours != nil {
		p.tasks.Go(p.hours.watch)
	}
}

func (p *Provider) resume(ctx context.Context) {
	open := p.leases.active()
	if p.d.Runner != nil {
		// No container of ours outlives a restart.
		if err := p.d.Runner.Sweep(ctx, func(string) bool { return false }); err != nil {
			p.log.Warn("sweep leftover containers", "err", err)
		}
	}
	if p.d.OpenGang != nil {
		// Nor any gang part's network namespace.
		for _, lr := range open {
			if _, _, ok := gangPart(lr.snapshot()); ok {
				if err := gangnet.RemoveLeftover(lr.snapshot().ID()); err != nil {
					p.log.Warn("remove a gang part's leftover network", "lease", lr.snapshot().ID(), "err", err)
				}
			}
		}
	}
	if pinned, err := pinnedRoots(ctx, p.d.Store); err != nil {
		p.log.Warn("sweep laid-out inputs", "err", err)
	} else if err := p.inputs.sweepLaidOut(pinned, true); err != nil {
		p.log.Warn("sweep laid-out inputs", "err", err)
	}
	if p.d.Disks != nil {
		// Nor any job's disk, mounted or, after a reboot, only a file;
		// leases signed since this start are running and keep theirs.
		before := map[string]bool{}
		for _, lr := range open {
			before[lr.snapshot().ID()] = true
		}
		live := func(id string) bool { return p.leases.lookup(id) != nil && !before[id] }
		if err := p.d.Disks.Sweep(filepath.Join(p.cfg.DataDir, "leases"), live); err != nil {
			p.log.Warn("sweep leftover job disks", "err", err)
		}
	}
	for _, lr := range open {
		lr.change(endInterrupted)
		rec := lr.snapshot()
		p.d.AddrBook.AddAddrs(lr.submitter, rec.SubmitterAddrs)
		p.log.Info("settling a lease left open by a restart", "lease", rec.ID())
		if rec.State == Released {
			// Only the output hand-over or the final receipt is missing.
			p.leases.remove(rec.ID())
		} else {
			// The meter stops at the last moment the lease was seen held,
			// not at this restart: the downtime is not the submitter's.
			lr.release(latest(rec.LastAlive, rec.Start, rec.RunStart, rec.OutputStart))
			lr.cleanup(ctx)
		}
		p.tasks.Go(lr.settle)
	}
}
