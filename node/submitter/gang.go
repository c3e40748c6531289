package submitter

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/e31network/e31/content"
	"github.com/e31network/e31/ledger"
	"github.com/e31network/e31/market"
	"github.com/e31network/e31/node/api"
	"github.com/e31network/e31/node/wire"
	"github.com/e31network/e31/p2p"
	"github.com/ipfs/go-cid"
	"github.com/libp2p/go-libp2p/core/peer"
)

// A gang (market.Request.Nodes) is an array whose tasks are its parts,
// placed by Match all at once on distinct providers. This node keeps a
// record for the gang, the handle its user follows, and one for each
// part, leased as a job of its own. What makes it a gang here:
//
//   - No part runs until every part is held. Once the last part's lease
//     is countersigned, this node names every part in one gang lease
//     (wire.GangLease), has each provider sign it, signs it last and
//     hands it to every provider, which then starts its part
//     (assembleGang). A gang whose parts are not all leased and started
//     within gangAssembleWithin gives its leases up, unrun and owed by no
//     one, and goes back to the queue whole (checkGangs).
//   - Failure is the gang's: a part that ends any way but completed ends
//     the others, each stopped with its grace to write a last checkpoint,
//     which is pulled (checkGangs). The gang ends as that part did, and
//     says which part.
//   - resume: auto goes on with the whole gang, each part from its own
//     last checkpoint (resumeGang); no part goes on by itself.

// gangAssembleWithin bounds how long the leased parts of a gang wait for
// the others, and for the gang lease's signatures, before they are given
// up and the gang queued again: Match assigns every part in one pass, so
// every part's provider proposes within a proposal's lifetime.
func (c *Config) gangAssembleWithin() time.Duration {
	return max(3*c.ProposalTTL, 20*time.Second)
}

// isGang reports whether the record is a gang's, not a part's.
func (r *Record) isGang() bool { return r.isArray() && r.Declaration.Request.Gang() }

// gangPart reports whether the record is a part of a gang.
func (r *Record) gangPart() bool { return r.Array != "" && r.Declaration.Request.Gang() }

// gangParts are the trackers of a gang's parts, by rank; nil where one
// is missing.
func (s *Submitter) gangParts(gang string, n int) []*jobTracker {
	out := make([]*jobTracker, n)
	for r := range n {
		out[r] = s.jobs.get(market.TaskID(gang, r))
	}
	return out
}

// gangs serialises the assembly of each gang, one at a time, and notes
// when each was last handed its start, so that a start not delivered is
// handed again, not every second.
type gangs struct {
	mu         sync.Mutex // guards both maps; a state lock
	assembling map[string]bool
	start      map[string]time.Time
}

// started notes a gang's start handed out at now.
func (g *gangs) started(gang string, now time.Time) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.start == nil {
		g.start = map[string]time.Time{}
	}
	g.start[gang] = now
}

// startDue reports whether a gang's start may be handed out again: not
// within every of the last time.
func (g *gangs) startDue(gang string, now time.Time, every time.Duration) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return now.Sub(g.start[gang]) >= every
}

// busy reports whether the gang is being assembled.
func (g *gangs) busy(gang string) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.assembling[gang]
}

func (g *gangs) claim(gang string) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.assembling == nil {
		g.assembling = map[string]bool{}
	}
	if g.assembling[gang] {
		return false
	}
	g.assembling[gang] = true
	return true
}

func (g *gangs) done(gang string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	delete(g.assembling, gang)
}

// partLeased is a part's lease as assembly reads it.
type partLeased struct {
	lease    wire.SignedLease
	provider peer.ID
}

// leasedParts returns every part's lease when every part of the gang is
// leased and not ended; ok is false otherwise.
func (s *Submitter) leasedParts(gang string, n int) ([]partLeased, bool) {
	out := make([]partLeased, n)
	for r, t := range s.gangParts(gang, n) {
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
		out[r] = partLeased{lease: *l, provider: id}
	}
	return out, true
}

// assembleGang starts a gang once every part is leased: it names the
// parts in one gang lease, has each provider sign it, signs it itself and
// hands it to each provider, which then starts its part. A provider that
// refuses to sign gives the gang up (giveUpGang), avoiding it for the
// part it held.
func (s *Submitter) assembleGang(ctx context.Context, gang string) {
	g := s.jobs.get(gang)
	if g == nil || !s.gangs.claim(gang) {
		return
	}
	defer s.gangs.done(gang)
	var n int
	var started *wire.SignedGangLease
	var over bool
	g.view(func(r *Record) { n, started, over = r.Tasks, r.GangLease, r.terminal() })
	if over || n < 2 {
		return
	}
	parts, ok := s.leasedParts(gang, n)
	if !ok {
		return
	}
	terms := wire.GangLease{Gang: gang, Submitter: s.d.Self.String()}
	for r, p := range parts {
		terms.Parts = append(terms.Parts, wire.GangPart{Rank: r, Provider: p.provider.String(), Lease: p.lease.Terms.ID})
	}
	if started != nil && slices.Equal(started.Terms.Parts, terms.Parts) {
		return // started already under these very leases
	}
	lease := wire.SignedGangLease{Terms: terms, ProviderSigs: make([][]byte, n)}
	errs := make([]error, n)
	var wg sync.WaitGroup
	for r, p := range parts {
		wg.Go(func() {
			var rep wire.GangReply
			errs[r] = s.callPart(ctx, p, wire.GangRequest{Lease: p.lease.Terms.ID, Gang: wire.SignedGangLease{Terms: terms}}, &rep)
			if errs[r] == nil {
				lease.ProviderSigs[r] = rep.ProviderSig
				errs[r] = lease.VerifyProvider(r)
			}
		})
	}
	wg.Wait()
	for r, err := range errs {
		if err != nil {
			s.log.Warn("a gang part's provider did not sign the gang lease", "gang", gang, "rank", r, "provider", parts[r].provider, "err", err)
			// A provider that declined, signed falsely, or took the
			// request and let it lapse unsigned (squatting on the part
			// while the other parts' GPUs are held for the gang, which
			// this node owes) is avoided for the part; one that could not
			// be reached is not blamed.
			avoid := -1
			if ctx.Err() == nil && (!p2p.Unreachable(err) || errors.Is(err, wire.ErrGang)) {
				avoid = r
			}
			s.giveUpGang(ctx, gang, fmt.Sprintf("part %d's provider %s did not sign the gang lease: %v", r, parts[r].provider, err), avoid)
			return
		}
	}
	if err := lease.SignSubmitter(s.d.Key); err != nil {
		s.log.Error("sign gang lease", "gang", gang, "err", err)
		return
	}
	if err := lease.Verify(); err != nil {
		s.giveUpGang(ctx, gang, "the gang lease's signatures do not verify: "+err.Error(), -1)
		return
	}
	if err := g.update(func(r *Record) error {
		r.GangLease = &lease
		return nil
	}); err != nil {
		s.log.Warn("gang lease not saved", "gang", gang, "err", err)
		return
	}
	// Parts given up while the lease was signed are not started.
	if now, ok := s.leasedParts(gang, n); !ok || !sameLeases(now, parts) {
		s.log.Info("gang's parts changed while its lease was signed: not started", "gang", gang)
		return
	}
	s.sendStart(ctx, gang, lease, parts)
	s.log.Info("gang started", "gang", gang, "parts", n)
}

// sameLeases reports whether two readings of a gang's parts name the
// same leases.
func sameLeases(a, b []partLeased) bool {
	return slices.EqualFunc(a, b, func(x, y partLeased) bool { return x.lease.Terms.ID == y.lease.Terms.ID })
}

// sendStart hands every part's provider the gang lease signed by all,
// on which it starts its part. A provider that already has it takes it
// again as nothing. One that is not reached is asked again at the next
// look (checkGangs), and failing that its part ends when its wait runs
// out, which ends the gang.
func (s *Submitter) sendStart(ctx context.Context, gang string, lease wire.SignedGangLease, parts []partLeased) {
	s.gangs.started(gang, time.Now())
	var wg sync.WaitGroup
	for r, p := range parts {
		wg.Go(func() {
			if err := s.callPart(ctx, p, wire.GangRequest{Lease: p.lease.Terms.ID, Gang: lease, Start: true}, nil); err != nil {
				s.log.Warn("gang start not delivered", "gang", gang, "rank", r, "provider", p.provider, "err", err)
			}
		})
	}
	wg.Wait()
}

// gangStartAgain is how often a gang whose parts are not all running yet
// is handed its start again, in case it was not delivered.
const gangStartAgain = 15 * time.Second

// gangCallTimeout bounds one call of the gang lease's: a signature, or
// the start, answered from memory.
func (c *Config) gangCallTimeout() time.Duration { return 15 * time.Second }

// callPart makes a gang lease's call to a part's provider. The provider
// registers its lease only once it has the countersignature, which the
// last part's is sent just before: a provider that does not know the
// lease yet is asked again, for a few seconds.
func (s *Submitter) callPart(ctx context.Context, p partLeased, req wire.GangRequest, reply any) error {
	deadline := time.Now().Add(s.cfg.gangCallTimeout())
	wait := 20 * time.Millisecond
	for {
		cctx, cancel := context.WithDeadline(ctx, deadline)
		err := s.d.Calls.Call(cctx, p.provider, wire.ProtoGang, req, reply)
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

// giveUpGang gives up every part's lease of a gang that could not start,
// each as never run and owed by no one, and puts the whole gang back in
// the queue; avoid, unless negative, is the rank whose provider failed
// it, avoided for that part (and so, by Match, for the gang).
func (s *Submitter) giveUpGang(ctx context.Context, gang, reason string, avoid int) {
	g := s.jobs.get(gang)
	if g == nil {
		return
	}
	var n int
	g.view(func(r *Record) { n = r.Tasks })
	now := time.Now()
	for r, t := range s.gangParts(gang, n) {
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
			t.releaseUnrun(ctx, lease, "gang "+gang+" did not start: "+reason, now, r == avoid)
		}
	}
	s.log.Info("gang given up, queued again", "gang", gang, "why", reason)
}

// checkGangs ends, once a part of a gang has ended any way but completed,
// the parts still running (each with its grace to checkpoint), and gives
// up a gang whose parts have not all been leased and started within
// gangAssembleWithin; a gang whose every part has ended goes on by itself
// where it declared resume: auto.
func (s *Submitter) checkGangs(ctx context.Context, now time.Time) {
	for _, g := range s.jobs.live() {
		var rec Record
		g.view(func(r *Record) {
			if r.isGang() && !r.placeholder() && !r.GangOver {
				rec = r.copy()
			}
		})
		if rec.ID == "" {
			continue
		}
		parts := s.gangParts(rec.ID, rec.Tasks)
		var failed *Record
		ended, leased, oldest := 0, 0, time.Time{}
		// running are the parts not ended and not yet told to stop: leased,
		// or still queued.
		var running []*jobTracker
		// renting: some part is leased but not started yet.
		renting := false
		// assembled: every part leased under the very leases the gang
		// lease names.
		assembled := rec.GangLease != nil && len(rec.GangLease.Terms.Parts) == len(parts)
		for rank, t := range parts {
			if t == nil {
				assembled = false
				continue
			}
			var p Record
			t.view(func(r *Record) { p = r.copy() })
			if p.Lease == nil || !assembled || rec.GangLease.Terms.Parts[rank].Lease != p.Lease.Terms.ID {
				assembled = false
			}
			renting = renting || (p.State == api.JobRenting && p.Lease != nil)
			switch {
			case p.terminal():
				ended++
				// A part withdrawn was stopped by the user, or because
				// another part failed: it is no cause of its own.
				if p.Outcome != ledger.OutcomeCompleted && p.Outcome != ledger.OutcomeWithdrawn && p.endedBefore(failed) {
					failed = &p
				}
			case p.Lease != nil:
				leased++
				if !p.Withdrawn {
					running = append(running, t)
				}
				if rent := p.stepAt(api.StepRent); oldest.IsZero() || rent.Before(oldest) {
					oldest = rent
				}
			default:
				running = append(running, t)
			}
		}
		switch {
		case s.gangs.busy(rec.ID):
			// Being assembled: its own steps decide.
		case failed != nil && len(running) > 0:
			s.endGang(ctx, rec.ID, failed, running)
		case failed != nil && ended == len(parts):
			s.gangEnded(ctx, g, *failed)
		case failed == nil && ended == len(parts):
			s.gangOver(g) // completed, or withdrawn
		case failed == nil && leased > 0 && !assembled && !oldest.IsZero() && now.Sub(oldest) > s.cfg.gangAssembleWithin():
			s.giveUpGang(ctx, rec.ID, fmt.Sprintf("%d of its %d parts were leased within %s", leased, len(parts), s.cfg.gangAssembleWithin()), -1)
		case failed == nil && leased == len(parts) && !assembled:
			// Every part held, the assembly not yet done (or lost to a
			// restart): try again.
			s.tasks.Go(func() { s.assembleGang(s.ctx, rec.ID) })
		case failed == nil && assembled && renting && s.gangs.startDue(rec.ID, now, gangStartAgain):
			// A part not started yet: its start may not have been
			// delivered, or a restart came between the lease and it.
			if ps, ok := s.leasedParts(rec.ID, len(parts)); ok {
				lease := *rec.GangLease
				s.gangs.started(rec.ID, now)
				s.tasks.Go(func() { s.sendStart(s.ctx, rec.ID, lease, ps) })
			}
		}
	}
}

// endGang ends the parts of a gang whose part failed that have not ended:
// a leased one is stopped by its provider, with its grace to write a last
// checkpoint, which is pulled; a queued one ends at once. The calls to
// the providers go on the submitter's tasks, so that the watch loop goes
// on meanwhile; a part told once is not told again (its record says it
// was withdrawn).
func (s *Submitter) endGang(ctx context.Context, gang string, failed *Record, running []*jobTracker) {
	s.log.Info("a gang part ended: ending the gang", "gang", gang, "part", failed.ID, "outcome", failed.Outcome, "why", failed.Reason)
	for _, t := range running {
		s.tasks.Go(func() {
			wctx, cancel := context.WithTimeout(ctx, s.cfg.gangCallTimeout())
			defer cancel()
			if _, err := t.withdraw(wctx, false); err != nil && !errors.Is(err, ErrConflict) {
				s.log.Warn("end a gang's part", "part", t.id, "err", err)
			}
		})
	}
}

// gangEnded goes on with a gang whose parts have all ended, failed as
// the part failed did, the whole gang again, each part from its own last
// checkpoint (gangContinues). The decision is saved before the next
// attempt is submitted, and a decision a restart cut short is carried out
// at the next look.
func (s *Submitter) gangEnded(ctx context.Context, g *jobTracker, failed Record) {
	err := g.update(func(r *Record) error {
		if r.Next != "" || r.Withdrawn || r.ResumeFailed != "" {
			return errSkip
		}
		if r.Resumed {
			return nil // decided before a restart; not yet submitted
		}
		switch failed.gangContinues(r) {
		case continueRetry:
			r.RetryNext = true
		case continuePreempted:
			r.PreemptNext = true
		case continueResume:
		default:
			return errSkip
		}
		r.Resumed = true
		return nil
	})
	if err == errSkip {
		s.gangOver(g)
		return
	}
	if err != nil {
		return
	}
	s.resuming.Lock()
	defer s.resuming.Unlock()
	if g.snapshot().Next != "" {
		return // the look before carried it out meanwhile
	}
	if _, err := s.resumeGang(ctx, g, false); err != nil {
		s.log.Warn("resume gang", "gang", g.id, "err", err)
		g.change(func(r *Record) error {
			r.ResumeFailed = err.Error()
			return nil
		})
	}
}

// How a gang goes on after a part failed (gangContinues).
type gangContinuation int

const (
	continueNot gangContinuation = iota
	// continueRetry: the job's own failure, with request.retries left.
	continueRetry
	// continuePreempted: the part's provider was taken back (a drain, its
	// hours, its owner's use): no fault of the job's, whatever it
	// declared, up to maxPreemptions times.
	continuePreempted
	// continueResume: lost with its provider, or failed by it, where the
	// gang declared resume: auto with resumes left.
	continueResume
)

// gangContinues says whether and how gang (the gang's record) goes on
// after its part failed ended as it did.
func (failed Record) gangContinues(gang *Record) gangContinuation {
	cp := gang.Declaration.Output.Checkpoints
	switch {
	case failed.retried():
		if gang.Retries < gang.Declaration.Request.Retries {
			return continueRetry
		}
	case failed.Outcome == ledger.OutcomePreempted:
		if gang.Preemptions < maxPreemptions {
			return continuePreempted
		}
	case cp != nil && cp.Resume == market.ResumeAuto && gang.Resumes < cp.MaxResumes:
		return continueResume
	}
	return continueNot
}

// resumeGang submits the whole gang again, as the next attempt of the
// gang: each part from its own last checkpoint (the checkpoint to resume
// from is a folder of one <rank> folder a part), or from the beginning
// with fromStart.
func (s *Submitter) resumeGang(ctx context.Context, g *jobTracker, fromStart bool) (api.Job, error) {
	parent := g.snapshot()
	d := parent.Declaration
	cp := d.Output.Checkpoints
	if !fromStart && cp != nil {
		var entries []content.FolderEntry
		for r, t := range s.gangParts(parent.ID, parent.Tasks) {
			if c, ok := s.partCheckpoint(ctx, t, cp.From, r); ok {
				entries = append(entries, content.FolderEntry{Name: strconv.Itoa(r), Root: c})
			}
		}
		d = fromTheStart(d)
		if len(entries) > 0 {
			folder, err := s.d.Store.Folder(ctx, entries, pinGangCheckpoints(parent.ID))
			if err != nil {
				return api.Job{}, fmt.Errorf("gang %s's checkpoints: %w", parent.ID, err)
			}
			d.Output.Checkpoints.From = folder.String()
		}
	} else {
		d = fromTheStart(d)
	}
	return s.submit(ctx, d, &parent, nil, nil)
}

func pinGangCheckpoints(gang string) string { return "checkpoints of gang " + gang }

// gangPartsOf lists a gang's parts for its view: each part's rank,
// provider and state, by its record.
func (s *Submitter) gangPartsOf(gang string, n int) []api.Part {
	out := make([]api.Part, 0, n)
	for r, t := range s.gangParts(gang, n) {
		p := api.Part{Rank: r, State: api.JobQueued}
		if t != nil {
			t.view(func(rec *Record) {
				p.ID, p.State, p.Outcome = rec.ID, rec.State, string(rec.Outcome)
				if rec.Lease != nil {
					p.Provider = rec.Lease.Terms.Provider
				}
			})
		}
		out = append(out, p)
	}
	return out
}

// isGangTracker reports whether the job is a gang's record.
func (j *jobTracker) isGangTracker() bool {
	var gang bool
	j.view(func(r *Record) { gang = r.isGang() })
	return gang
}

// resumeGangByHand is e31 resume of a gang: once every part has ended and
// one did not complete, the whole gang again, each part from its own last
// checkpoint, or from the beginning with fromStart.
func (s *Submitter) resumeGangByHand(ctx context.Context, g *jobTracker, fromStart bool) (api.Job, error) {
	s.resuming.Lock()
	defer s.resuming.Unlock()
	// Under the lock: a resumption that came first is the last attempt.
	g = s.lastAttempt(g)
	view, _ := s.arrayView(g, 0, true)
	switch {
	case !view.State.Terminal():
		return api.Job{}, conflict(fmt.Errorf("gang %s is still %s: withdraw it first", view.ID, view.State))
	case view.Outcome == string(ledger.OutcomeCompleted):
		return api.Job{}, conflict(fmt.Errorf("gang %s completed: nothing to resume", view.ID))
	}
	if err := g.update(func(r *Record) error {
		if r.Next != "" {
			return conflict(fmt.Errorf("gang %s was resumed already, as %s", view.ID, r.Next))
		}
		r.Resumed = true
		return nil
	}); err != nil {
		return api.Job{}, err
	}
	return s.resumeGang(ctx, g, fromStart)
}

// isGangPart reports whether the job is a part of a gang.
func (j *jobTracker) isGangPart() bool {
	var part bool
	j.view(func(r *Record) { part = r.gangPart() })
	return part
}

// gangHasProvider reports whether a part of the gang other than job is
// leased, and not ended, on provider: no two parts share one (Match never
// puts them there, but two passes of different views might).
func (s *Submitter) gangHasProvider(gang, job, provider string) bool {
	g := s.jobs.get(gang)
	if g == nil {
		return false
	}
	var n int
	g.view(func(r *Record) { n = r.Tasks })
	for _, t := range s.gangParts(gang, n) {
		if t == nil || t.id == job {
			continue
		}
		held := false
		t.view(func(r *Record) { held = r.Lease != nil && !r.terminal() && r.Lease.Terms.Provider == provider })
		if held {
			return true
		}
	}
	return false
}

// gangView completes an array's view of a gang: its parts, and, once it
// has ended short of completion, how: as the part that ended it did (the
// others were stopped because of it), naming that part.
func (s *Submitter) gangView(out *api.Job, parent Record) {
	out.Parts = s.gangPartsOf(parent.ID, parent.Tasks)
	if out.State == api.JobQueued {
		// Match says why of each part alike: the gang's reason.
		if p0, _, err := s.view(market.TaskID(parent.ID, 0), 0, true); err == nil && p0.Reason != "" {
			out.Reason = p0.Reason
		}
	}
	if out.State == api.JobQueued {
		for _, p := range out.Parts {
			if p.State != api.JobQueued {
				// Some parts held, waiting for the rest.
				out.State, out.Reason = api.JobRenting, "holding the parts leased so far until every part is, to start them together"
				break
			}
		}
	}
	if !out.State.Terminal() || out.Outcome == string(ledger.OutcomeCompleted) {
		return
	}
	// The part that ended the gang: of those that failed, the first to
	// end (the others were stopped because of it).
	var cause *Record
	var at api.Part
	for _, p := range out.Parts {
		if p.Outcome == "" || p.Outcome == string(ledger.OutcomeCompleted) || p.Outcome == string(ledger.OutcomeWithdrawn) {
			continue
		}
		t := s.jobs.get(p.ID)
		if t == nil {
			continue
		}
		r := t.snapshot()
		if r.endedBefore(cause) {
			cause, at = &r, p
		}
	}
	if cause != nil {
		out.Outcome, out.Attribution = string(cause.Outcome), string(cause.Attribution)
		out.Reason = fmt.Sprintf("part %d (on %s) ended %s: %s", at.Rank, at.Provider, cause.Outcome, cause.Reason)
	}
}

// gangResumeDue reports whether a gang that has ended short of completion
// as failed says is about to go on by itself (gangContinues), or was
// decided to before a restart, so that its followers see it queued rather
// than ended.
func (r *Record) gangResumeDue(failed Record) bool {
	if !r.isGang() || r.Next != "" || r.ResumeFailed != "" || r.Withdrawn {
		return false
	}
	return r.Resumed || failed.gangContinues(r) != continueNot
}

// gangChainView is the view of a gang under the ID it was submitted
// with: its last attempt, the whole gang again after a failure, with
// every attempt listed.
func (s *Submitter) gangChainView(first *jobTracker, seen uint64, done bool) (api.Job, <-chan struct{}) {
	chain := s.attempts(first)
	last := chain[len(chain)-1]
	out, changed := s.arrayView(last, seen, done)
	lastRec := last.snapshot()
	failed := Record{Outcome: ledger.Outcome(out.Outcome), Attribution: ledger.Attribution(out.Attribution)}
	if out.State.Terminal() && out.Outcome != string(ledger.OutcomeCompleted) && out.Outcome != string(ledger.OutcomeWithdrawn) && lastRec.gangResumeDue(failed) {
		out.State, out.Outcome, out.Attribution = api.JobQueued, "", ""
		out.Reason = "going on whole, each part from its last checkpoint: " + out.Reason
	}
	if len(chain) == 1 {
		return out, changed
	}
	out.ID = first.id
	out.Attempts = out.Attempts[:0]
	for i, g := range chain {
		v, _ := s.arrayView(g, 0, true)
		out.Attempts = append(out.Attempts, api.Attempt{N: i + 1, ID: g.id, State: v.State, Outcome: v.Outcome,
			Attribution: v.Attribution, Reason: v.Reason, Submitted: v.Submitted})
	}
	return out, changed
}

// endedBefore reports whether r, a gang part that failed, ended before
// cause, the failed part found so far (nil: none yet). Of a gang's parts
// that failed, the first to end is the gang's cause; the others were
// stopped because of it.
func (r *Record) endedBefore(cause *Record) bool {
	return cause == nil || r.stepAt(api.StepRelease).Before(cause.stepAt(api.StepRelease))
}

// partCheckpoint is what part rank of a gang goes on from: its own last
// checkpoint, held here; else, for a part that took none in this attempt,
// the one it started from (its <rank> folder of from, the attempt's own
// checkpoint to resume from); ok is false when there is neither, and the
// part starts again.
func (s *Submitter) partCheckpoint(ctx context.Context, t *jobTracker, from string, rank int) (cid.Cid, bool) {
	if t != nil {
		var ck string
		t.view(func(rec *Record) { ck = rec.Checkpoint })
		if c, err := cid.Decode(ck); err == nil {
			if _, err := s.d.Store.Size(ctx, c); err == nil {
				return c, true
			}
			s.log.Warn("a gang part's last checkpoint is not held here: going on from the one before", "part", t.id, "checkpoint", c)
		}
	}
	root, err := cid.Decode(from)
	if err != nil {
		return cid.Undef, false
	}
	c, err := s.d.Store.Resolve(ctx, root, strconv.Itoa(rank))
	if err != nil {
		return cid.Undef, false
	}
	return c, true
}

// withdrawGang withdraws a gang: under the ID it was submitted with
// (whole), its last attempt, so that one going on after a failure stops
// too. The gang's record says so first, so that a part that fails while
// the others are stopped is no cause to go on.
func (s *Submitter) withdrawGang(ctx context.Context, g *jobTracker, whole bool) (api.Job, error) {
	s.resuming.Lock()
	last := g
	if whole {
		last = s.lastAttempt(g)
	}
	err := last.update(func(r *Record) error {
		r.Withdrawn = true
		return nil
	})
	s.resuming.Unlock()
	if err != nil {
		return api.Job{}, err
	}
	if _, err := s.withdrawArray(ctx, last); err != nil {
		return api.Job{}, err
	}
	out, _, err := s.view(g.id, 0, true)
	return out, err
}

// gangOver notes that a gang attempt has ended for good (completed,
// withdrawn, failed with nothing left to go on with, or gone on as its
// next attempt): checkGangs looks at it no more. A resumption by hand
// still finds it.
func (s *Submitter) gangOver(g *jobTracker) {
	g.change(func(r *Record) error {
		r.GangOver = true
		return nil
	})
}
