package submitter

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/e31network/e31/content"
	"github.com/e31network/e31/ledger"
	"github.com/e31network/e31/market"
	"github.com/e31network/e31/node/api"
	"github.com/e31network/e31/node/wire"
	"github.com/e31network/e31/p2p"
)

// Submit validates a declaration (or, with req.ResumeOf, builds the one
// that resumes that job, or runs it again with req.FromStart, or with
// changed work or chosen tasks: rework.go), imports its
// local inputs, signs it and broadcasts it. Nothing is broadcast for a
// declaration that fails any check.
func (s *Submitter) Submit(ctx context.Context, req api.SubmitRequest, progress content.Progress) (api.Job, error) {
	if req.ResumeOf != "" {
		if len(req.Secrets) > 0 {
			if err := s.in.resumeSecrets(req.ResumeOf, req.Secrets); err != nil {
				return api.Job{}, err
			}
		}
		if reworkAsked(req) {
			return s.kit.rerun(ctx, req, progress)
		}
		j := s.jobs.get(req.ResumeOf)
		if j == nil {
			return api.Job{}, fmt.Errorf("job %s: %w", req.ResumeOf, ErrNotFound)
		}
		return s.handleOf(j).resume(ctx, req.FromStart)
	}
	decl, err := market.DecodeDeclaration(req.Declaration)
	if err == nil {
		decl, err = secretsGiven(decl, req.Secrets)
	}
	if err != nil {
		s.d.Metrics.Rejected.Inc()
		return api.Job{}, invalid(err)
	}
	return s.in.submit(ctx, decl, nil, progress, req.Secrets)
}

// intake takes new jobs in, and the next attempts of jobs: it checks,
// imports, signs and broadcasts their declarations, keeps their records
// and secrets, and hands held jobs (hold.go) and arrays (array.go) their
// first records. It keeps no state of its own.
type intake struct {
	*kit
	// replicas submits the other replicas of a job that asks for them
	// and follows the check (replicate.go); immutable after New.
	replicas func(ctx context.Context, head Record, tasks []*Record) error
}

// submit checks, imports, signs and broadcasts a declaration: a new job,
// with secrets the values of its secrets (secretsGiven), or with parent
// the next attempt of parent's job, which reads the job's.
func (s *intake) submit(ctx context.Context, decl market.Declaration, parent *Record, progress content.Progress, secrets map[string][]byte) (api.Job, error) {
	return s.submitAs(ctx, decl, parent, progress, secrets, nil)
}

// submitAs is submit, with before, when set, given the new job's record
// once its ID is known and before it is saved and broadcast: what must
// hold from the first proposal on (a replica names the job it checks).
func (s *intake) submitAs(ctx context.Context, decl market.Declaration, parent *Record, progress content.Progress, secrets map[string][]byte, before func(*Record) error) (api.Job, error) {
	// Made exact below, in place: a resumption's declaration shares its
	// data with the record it came from.
	decl.Data = slices.Clone(decl.Data)
	if parent == nil && (len(decl.After) > 0 || len(decl.AfterAny) > 0) && decl.Array == nil && decl.Verify != nil && decl.Verify.Replicas > 1 {
		s.d.Metrics.Rejected.Inc()
		return api.Job{}, invalid(errors.New("verify.replicas with after or after_any: a held job is not run as replicas yet; submit it once its upstreams have ended, or run it as an array of one task"))
	}
	if parent == nil && (len(decl.After) > 0 || len(decl.AfterAny) > 0) {
		return s.submitHeld(ctx, decl, progress, secrets)
	}
	// A held job's first attempt links to its record as a resumption does
	// to the attempt before it, but the network hears of no resumption.
	resumeOf, announcedOf := "", ""
	if parent != nil {
		resumeOf, announcedOf = parent.ID, parent.ID
		switch {
		case parent.placeholder():
			announcedOf = ""
		case parent.MovedTo != nil:
			// Not a resumption: the same run, declared elsewhere.
			announcedOf = parent.ResumeOf
		}
	}
	if err := s.resolveJobSources(ctx, &decl); err != nil {
		s.d.Metrics.Rejected.Inc()
		return api.Job{}, invalid(err)
	}
	if err := checkLocalSources(decl); err != nil {
		s.d.Metrics.Rejected.Inc()
		return api.Job{}, invalid(err)
	}
	// Chosen before the inputs are imported: a job no market here fits
	// is refused at once.
	var declaredIn *p2p.Shard
	if s.d.Markets != nil {
		var m p2p.Shard
		var err error
		if parent != nil && parent.MovedTo != nil {
			m = *parent.MovedTo // where the move takes it (move.go)
		} else {
			m, err = s.d.Markets.choose(decl.Request, sourceRoots(decl))
		}
		if err != nil {
			s.d.Metrics.Rejected.Inc()
			return api.Job{}, invalid(err)
		}
		declaredIn = &m
		if !s.ownMarket(declaredIn) {
			// Followed from now, while the inputs are imported: the
			// declaration finds peers on its jobs topic.
			if _, err := s.d.Markets.Follow.Follow(ctx, m); err != nil {
				return api.Job{}, fmt.Errorf("follow market %s for the job: %w", m, err)
			}
		}
	}
	if r := &decl.Request; r.Locality == "" && r.LocalityWait == 0 {
		if s.cfg.NoLocality {
			r.Locality = market.LocalityOff
		} else {
			r.LocalityWait = market.Duration(s.cfg.LocalityWait.Milliseconds())
		}
	}
	// Labels are this node's own: kept on the record, never signed or
	// broadcast. A resumption keeps those of the job it resumes.
	labels := decl.Labels
	decl.Labels = nil
	// So is the verify section: no provider may tell a job that will be
	// checked, or a run that checks another, from any other job.
	check := decl.Verify
	decl.Verify = nil
	if labels == nil && parent != nil {
		labels = maps.Clone(parent.Labels)
	}
	sources, err := importer{s.parts}.exact(ctx, &decl, progress)
	if err != nil {
		return api.Job{}, err
	}
	maxFailures := 0
	if decl.Array != nil {
		a := *decl.Array
		if err := readValuesFile(&a); err != nil {
			s.d.Metrics.Rejected.Inc()
			return api.Job{}, invalid(err)
		}
		// This node's alone, kept on the array's record (array_stop.go):
		// peers need not read it.
		maxFailures, a.MaxFailures = a.MaxFailures, 0
		decl.Array = &a
	}
	body := wire.DeclarationBody{Declaration: decl, Addrs: s.d.Addrs(), ResumeOf: announcedOf, Market: declaredIn}
	if err := body.Check(); err != nil {
		return api.Job{}, invalid(err)
	}
	sealed, err := p2p.Seal(s.d.Key, wire.KindDeclaration, body, time.Now())
	if err != nil {
		return api.Job{}, invalid(err)
	}
	if len(sealed.Raw) > wire.MaxDeclarationEnvelope {
		return api.Job{}, invalid(fmt.Errorf("the signed declaration is %d bytes, over the %d a queued job can be re-announced in: make work.env or the command shorter", len(sealed.Raw), wire.MaxDeclarationEnvelope))
	}
	id := wire.JobID(sealed)
	if err := s.keepSecrets(id, decl, parent, secrets); err != nil {
		return api.Job{}, err
	}
	if parent == nil && len(decl.Secrets) > 0 {
		defer s.forgetUnregistered(id)
	}
	if decl.Split() {
		return s.announceArray(ctx, sealed, decl, arrayOwn{labels, sources, maxFailures, check, declaredIn, before}, parent)
	}
	now := time.Now()
	rec := &Record{ID: id, Envelope: sealed.Raw, Declaration: decl, Market: declaredIn, Labels: labels, Sources: sources, RecordChain: RecordChain{ResumeOf: resumeOf}, State: api.JobQueued, Submitted: now,
		RecordVerify: RecordVerify{Verify: check}}
	rec.step(api.StepSubmit, now)
	// Every DAG the provider will fetch stays pinned for the job.
	if err := s.pinContent(ctx, rec); err != nil {
		return api.Job{}, err
	}
	if parent != nil {
		rec.Resumes, rec.Retries = parent.Resumes+1, parent.Retries
		rec.Moves = parent.Moves
		switch {
		case parent.MovedTo != nil:
			// The same run, queued elsewhere: it keeps its counts and
			// the providers it avoids.
			rec.Resumes, rec.Moves = parent.Resumes, parent.Moves+1
			rec.RecordAvoid = parent.RecordAvoid.clone()
		case parent.placeholder():
			rec.Resumes = 0 // the first run of a held job
		case parent.retried():
			rec.Resumes, rec.Retries = parent.Resumes, parent.Retries+1
		case parent.Outcome == ledger.OutcomePreempted:
			rec.Resumes = parent.Resumes
		}
		rec.Preemptions = parent.Preemptions
		if parent.Outcome == ledger.OutcomePreempted {
			rec.Preemptions++
		}
		rec.Root = parent.root()
	}
	if before != nil {
		if err := before(rec); err != nil {
			return api.Job{}, err
		}
	}
	j := newJobTracker(s.parts, rec)
	snap := j.snapshot()
	// Saved before it is broadcast: a proposal may arrive at once.
	if err := j.write(&snap); err != nil {
		return api.Job{}, err
	}
	s.jobs.add(j)
	if err := s.publishJobRaw(ctx, declaredIn, sealed.Raw); err != nil {
		// Saved and queued: the requeue loop announces it again.
		s.log.Warn("announce job", "job", id, "err", err)
	}
	if parent == nil || !parent.placeholder() && parent.MovedTo == nil {
		s.d.Metrics.Submitted.Inc() // a held job was counted when it was
	}
	s.log.Info("job submitted", "job", id, "name", decl.Name, "gpus", decl.Request.GPUs)
	if snap.replicated() {
		if err := s.replicas(ctx, snap, nil); err != nil {
			s.log.Warn("replicas not all submitted: the check compares those that run", "job", id, "err", err)
		}
		out, _ := s.handleOf(j).view(0, true)
		return out, nil
	}
	out := snap.API()
	out.Version = s.versionBase // no change counted yet
	return out, nil
}

// pinContent pins every DAG a provider will fetch for the job: the image
// under its own reason, the inputs and a checkpoint to resume from under
// the inputs'.
func (s *intake) pinContent(ctx context.Context, rec *Record) error {
	for _, c := range rec.contentRoots() {
		reason := pinInput(rec.ID)
		if c.String() == rec.Declaration.Work.Image {
			reason = pinImage(rec.ID)
		}
		if err := s.d.Store.Pin(ctx, c, reason); err != nil {
			return fmt.Errorf("pin %s: %w", c, err)
		}
	}
	return nil
}

// resolveJobSources replaces each data source job:JOB/PATH with the CID
// path of that job's output: JOB a job of this node (an ID or a unique
// prefix) that has returned its output.
func (s *intake) resolveJobSources(ctx context.Context, d *market.Declaration) error {
	for i := range d.Data {
		src := d.Data[i].Source
		if !strings.HasPrefix(src, market.JobSourcePrefix) {
			continue
		}
		f := fmt.Sprintf("data[%d].source %q", i, src)
		id, sub, ok := market.SplitJobSource(src)
		if !ok {
			return fmt.Errorf("%s: want job:JOB/out or job:JOB/out/PATH", f)
		}
		out, err := s.outputOf(ctx, id)
		if err != nil {
			return fmt.Errorf("%s: %w", f, err)
		}
		d.Data[i].Source = out + "/" + sub
	}
	return nil
}

// outcomeSuffix is ", OUTCOME" for a job that has an outcome.
func outcomeSuffix(outcome string) string {
	if outcome == "" {
		return ""
	}
	return ", " + outcome
}
