package submitter

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/e31network/e31/content"
	"github.com/e31network/e31/ledger"
	"github.com/e31network/e31/market"
	"github.com/e31network/e31/node/api"
	"github.com/e31network/e31/node/task"
	"github.com/e31network/e31/node/wire"
)

// A job whose declaration names upstream jobs (after, after_any) is held
// on this node until they have ended as it asks: it is not signed or
// announced, since a data source job:UPSTREAM/out is not known until the
// upstream completes, and a job's network ID is the hash of its signed
// declaration. The held job's record stands under an ID of this node's
// making, the one its user follows; released, the job it becomes is
// announced as its first attempt (Next), as a resumption continues a job.

// heldJob is the handle of a held job's record: before its release the
// job, after it the chain it became (its first attempt and those after),
// which it is shown, withdrawn and resumed as. Its state is its record's
// Hold; its lock its tracker's, and the kit's resuming across a release,
// which orders it with the resumptions.
type heldJob struct{ chain }

// became is the tracker of the array (or gang) a held array became once
// released; nil for a held job that is not an array, or not released yet.
func (h heldJob) became() *jobTracker {
	if last := h.k.lastAttempt(h.j); last != h.j && last.isArrayTracker() {
		return last
	}
	return nil
}

func (h heldJob) withdraw(ctx context.Context) (api.Job, error) {
	if a := h.became(); a != nil {
		return (arrayRun{h.k, a}).withdraw(ctx) // a gang too: its parts are tasks
	}
	return h.chain.withdraw(ctx)
}

func (h heldJob) resume(ctx context.Context, fromStart bool) (api.Job, error) {
	if a := h.became(); a != nil {
		return h.k.handleOf(a).resume(ctx, fromStart)
	}
	return h.chain.resume(ctx, fromStart)
}

func (h heldJob) output(ctx context.Context) (string, error) {
	if a := h.became(); a != nil {
		return h.k.handleOf(a).output(ctx)
	}
	return h.chain.output(ctx)
}

// Hold is what a held job waits for: its upstreams by full ID. Released is
// set once the job was announced, or ended because an upstream did not
// complete.
type Hold struct {
	After    []string `json:"after,omitempty"`
	AfterAny []string `json:"after_any,omitempty"`
	Released bool     `json:"released,omitempty"`
}

// released is h marked released, as a new Hold (Record.Hold is never
// changed in place).
func (h *Hold) released() *Hold {
	c := *h
	c.Released = true
	return &c
}

// endHeld ends a held job that never ran, as e says.
func (r *Record) endHeld(e ledger.Ending) {
	r.State = api.JobReleased
	r.setEnding(e)
	r.Wait = ""
	r.step(api.StepRelease, time.Now())
}

// submitHeld checks a declaration that names upstreams and keeps it on
// this node until they have ended, or, when they all have already,
// submits it at once.
func (s *intake) submitHeld(ctx context.Context, decl market.Declaration, progress content.Progress, secrets map[string][]byte) (api.Job, error) {
	hold := &Hold{}
	for _, list := range []struct {
		field string
		ids   []string
		to    *[]string
	}{{"after", decl.After, &hold.After}, {"after_any", decl.AfterAny, &hold.AfterAny}} {
		for i, id := range list.ids {
			up, _, err := s.view(id, 0, true)
			if err != nil {
				return api.Job{}, invalid(fmt.Errorf("%s[%d] %s: %w", list.field, i, id, err))
			}
			if slices.Contains(hold.After, up.ID) || slices.Contains(hold.AfterAny, up.ID) {
				return api.Job{}, invalid(fmt.Errorf("%s[%d]: job %s is named twice", list.field, i, up.ID))
			}
			*list.to = append(*list.to, up.ID)
		}
	}
	decl.After, decl.AfterAny = nil, nil
	// A job:JOB source of an upstream is resolved at release; any other
	// is checked now, as for any job.
	deferred := make([]bool, len(decl.Data))
	for i, in := range decl.Data {
		id, _, ok := market.SplitJobSource(in.Source)
		if !ok {
			continue
		}
		full := s.jobs.fullID(id)
		if slices.Contains(hold.After, full) || slices.Contains(hold.AfterAny, full) {
			deferred[i] = true
			decl.Data[i].Source = market.JobSourcePrefix + full + strings.TrimPrefix(in.Source, market.JobSourcePrefix+id)
		}
	}
	if verdict, _ := s.upstreams(hold); verdict == upstreamsDone {
		return s.submit(ctx, decl, nil, progress, secrets)
	}
	if err := decl.Validate(); err != nil {
		s.d.Metrics.Rejected.Inc()
		return api.Job{}, invalid(err)
	}
	// Local files are taken now: the user may change or remove them, and
	// the CLI may be gone, by the time the upstreams complete.
	now := &market.Declaration{}
	*now = decl
	now.Data = nil
	for i, in := range decl.Data {
		if !deferred[i] {
			now.Data = append(now.Data, in)
		}
	}
	if err := s.resolveJobSources(ctx, now); err != nil {
		s.d.Metrics.Rejected.Inc()
		return api.Job{}, invalid(err)
	}
	if err := checkLocalSources(*now); err != nil {
		s.d.Metrics.Rejected.Inc()
		return api.Job{}, invalid(err)
	}
	sources, err := importer{s.parts}.exact(ctx, now, progress)
	if err != nil {
		return api.Job{}, err
	}
	k := 0
	for i := range decl.Data {
		if !deferred[i] {
			decl.Data[i] = now.Data[k]
			k++
		}
	}
	decl.Work = now.Work
	labels := decl.Labels
	decl.Labels = nil
	var h [32]byte
	if _, err := rand.Read(h[:]); err != nil {
		return api.Job{}, fmt.Errorf("held job ID: %w", err)
	}
	at := time.Now()
	rec := &Record{ID: wire.JobIDOf(h), Declaration: decl, Labels: labels, Sources: sources, State: api.JobQueued,
		Submitted: at, RecordHold: RecordHold{Hold: hold}}
	rec.Wait = s.holdReason(hold)
	rec.step(api.StepSubmit, at)
	// The hold is the job's first record: its attempts read the values
	// kept under it.
	if err := s.keepSecrets(rec.ID, decl, nil, secrets); err != nil {
		return api.Job{}, err
	}
	if len(decl.Secrets) > 0 {
		defer s.forgetUnregistered(rec.ID)
	}
	if err := s.pinContent(ctx, rec); err != nil {
		return api.Job{}, err
	}
	j := newJobTracker(s.parts, rec)
	snap := j.snapshot()
	if err := j.write(&snap); err != nil {
		return api.Job{}, err
	}
	s.jobs.add(j)
	s.d.Metrics.Submitted.Inc()
	s.log.Info("job held for its upstreams", "job", rec.ID, "name", decl.Name, "after", hold.After, "after_any", hold.AfterAny)
	out := snap.API()
	out.Version = s.versionBase
	return out, nil
}

// How a held job's upstreams stand.
const (
	upstreamsWaiting = iota // some have not ended as the job asks yet
	upstreamsDone           // every one has: the job is released
	upstreamsFailed         // an after upstream ended other than completed
)

// upstreams says how a held job's upstreams stand and, for one that
// failed it, which and how. It reads the records only (view), not the
// ledger: the hold loop asks every second.
func (s *kit) upstreams(h *Hold) (int, api.Job) {
	verdict := upstreamsDone
	for _, id := range h.After {
		up, _, err := s.view(id, 0, true)
		switch {
		case err != nil:
			return upstreamsFailed, api.Job{ID: id, State: api.JobReleased, Reason: err.Error()}
		case !up.State.Terminal():
			verdict = upstreamsWaiting
		case ledger.Outcome(up.Outcome) != ledger.OutcomeCompleted:
			return upstreamsFailed, up
		case up.Output == "" && up.Tasks == nil:
			// Completed, its output still on the way from a provider that
			// keeps it for this node (it was away at the hand-over). An
			// array's output is its tasks' (arrayOutput).
			verdict = upstreamsWaiting
		}
	}
	for _, id := range h.AfterAny {
		if up, _, err := s.view(id, 0, true); err == nil && !up.State.Terminal() {
			verdict = upstreamsWaiting
		}
	}
	return verdict, api.Job{}
}

// holdReason says what a held job waits for: "after 3ab… (running),
// 7cd… (queued)".
func (s *kit) holdReason(h *Hold) string {
	var parts []string
	for _, id := range slices.Concat(h.After, h.AfterAny) {
		st := "gone"
		if up, _, err := s.view(id, 0, true); err == nil {
			st = string(up.State)
			if up.State.Terminal() {
				continue
			}
		}
		parts = append(parts, fmt.Sprintf("%s (%s)", id, st))
	}
	return "held until its upstreams end: " + strings.Join(parts, ", ")
}

// holdLoop releases held jobs as their upstreams end: every second, and at
// start for those a previous run left held.
func (s *kit) holdLoop(ctx context.Context) {
	every := time.Second
	if s.cfg.Heartbeat > 0 && s.cfg.Heartbeat < every {
		every = s.cfg.Heartbeat
	}
	task.NowAndEvery(ctx, every, func(time.Time) {
		for _, j := range s.jobs.live() {
			var held, claimed bool
			j.view(func(r *Record) {
				held = r.holding()
				claimed = r.Hold != nil && r.Hold.Released && !r.terminal()
			})
			switch {
			case held:
				heldOf(s, j).release(ctx)
			case claimed:
				s.resuming.Lock()
				heldOf(s, j).finishRelease(ctx)
				s.resuming.Unlock()
			}
		}
	})
}

// release announces a held job whose upstreams have ended as it asks,
// as its first attempt, or ends it failed when an after upstream did not
// complete; otherwise it brings the job's reason up to date.
func (h heldJob) release(ctx context.Context) {
	s, j := h.k, h.j
	s.resuming.Lock()
	defer s.resuming.Unlock()
	var rec Record
	j.view(func(r *Record) { rec = r.copy() })
	if !rec.holding() {
		return
	}
	verdict, up := s.upstreams(rec.Hold)
	switch verdict {
	case upstreamsWaiting:
		reason := s.holdReason(rec.Hold)
		j.change(func(r *Record) error {
			if r.Wait == reason {
				return errSkip
			}
			r.Wait = reason
			return nil
		})
		return
	case upstreamsFailed:
		// Nothing was held for it and nothing is owed: it never ran.
		attribution := ledger.Attribution(up.Attribution)
		if attribution == "" {
			attribution = ledger.AttributionSubmitter
		}
		how := string(up.State)
		if up.Outcome != "" {
			how = up.Outcome
		}
		err := j.update(func(r *Record) error {
			if !r.holding() {
				return errSkip
			}
			r.Hold = r.Hold.released()
			r.endHeld(ledger.Ending{Outcome: ledger.OutcomeFailed, Attribution: attribution,
				Reason: fmt.Sprintf("upstream %s ended %s (%s)", up.ID, how, up.Reason)})
			return nil
		})
		if err == nil {
			s.log.Info("held job ended: an upstream did not complete", "job", j.id, "upstream", up.ID, "outcome", how)
		}
		return
	}
	// Claimed on disk first: a restart between the claim and the link
	// below finishes the release (finishRelease) instead of submitting
	// the job twice.
	if err := j.update(func(r *Record) error {
		if !r.holding() {
			return errSkip
		}
		r.Hold = r.Hold.released()
		return nil
	}); err != nil {
		if err != errSkip {
			s.log.Warn("release held job: claim not saved", "job", j.id, "err", err)
		}
		return
	}
	h.finishRelease(ctx)
}

// finishRelease announces a held job that was claimed for release, unless
// its first attempt is there already (a previous run announced it and
// stopped before it wrote the link, which linkAttempts mended), and marks
// the held record as ended into it. The caller holds the kit's resuming.
func (h heldJob) finishRelease(ctx context.Context) {
	s, j := h.k, h.j
	var rec Record
	j.view(func(r *Record) { rec = r.copy() })
	if rec.Hold == nil || !rec.Hold.Released || rec.terminal() {
		return
	}
	next := rec.Next
	if next == "" {
		decl := rec.Declaration
		decl.Data = slices.Clone(decl.Data)
		job, err := s.in.submit(ctx, decl, &rec, nil, nil)
		switch {
		case err != nil && ctx.Err() == nil && errors.Is(err, ErrInvalid):
			// The declaration cannot be submitted as it stands (an
			// after_any upstream that left no output for job:UP/out):
			// trying again cannot help.
			s.log.Warn("held job not released", "job", j.id, "err", err)
			j.update(func(r *Record) error {
				if r.terminal() {
					return errSkip
				}
				r.endHeld(ledger.Ending{Outcome: ledger.OutcomeFailed, Attribution: ledger.AttributionSubmitter,
					Reason: "not released: " + err.Error()})
				return nil
			})
			return
		case err != nil:
			// Stopping, or a fault of this node's (its store, its disk):
			// the claim stays, and the next tick tries again.
			s.log.Warn("release held job; trying again", "job", j.id, "err", err)
			return
		}
		next = job.ID
	}
	withdrawn := false
	j.update(func(r *Record) error {
		r.Next = next
		withdrawn = r.State == api.JobWithdrawn
		if !r.terminal() {
			r.State = api.JobReleased
		}
		r.Wait = ""
		return nil
	})
	if n := s.jobs.get(next); withdrawn && n != nil {
		// Withdrawn while it was being announced: so is what it became.
		if n.isArrayTracker() {
			if _, err := (arrayRun{s, n}).withdraw(ctx); err != nil {
				s.log.Warn("withdraw a held array", "job", j.id, "as", next, "err", err)
			}
			return
		}
		if _, err := n.withdraw(ctx, true); err != nil {
			s.log.Warn("withdraw a held job's first attempt", "job", j.id, "as", next, "err", err)
		}
		return
	}
	s.log.Info("held job released", "job", j.id, "as", next)
}

// heldOf is the handle of a held job's record, j.
func heldOf(k *kit, j *jobTracker) heldJob { return heldJob{chain{k, j, true}} }
