package submitter

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/e31network/e31/content"
	"github.com/e31network/e31/content/image"
	"github.com/e31network/e31/ledger"
	"github.com/e31network/e31/market"
	"github.com/e31network/e31/node/api"
	"github.com/e31network/e31/node/wire"
	"github.com/e31network/e31/p2p"
	"github.com/ipfs/go-cid"
	"github.com/libp2p/go-libp2p/core/peer"
)

// Submit validates a declaration (or, with req.ResumeOf, builds the one
// that resumes that job, or runs it again with req.FromStart), imports its
// local inputs, signs it and broadcasts it. Nothing is broadcast for a
// declaration that fails any check.
func (s *Submitter) Submit(ctx context.Context, req api.SubmitRequest, progress content.Progress) (api.Job, error) {
	if req.ResumeOf != "" {
		if len(req.Secrets) > 0 {
			if err := s.resumeSecrets(req.ResumeOf, req.Secrets); err != nil {
				return api.Job{}, err
			}
		}
		return s.resume(ctx, req.ResumeOf, req.FromStart, false)
	}
	decl, err := market.DecodeDeclaration(req.Declaration)
	if err == nil {
		decl, err = secretsGiven(decl, req.Secrets)
	}
	if err != nil {
		s.d.Metrics.Rejected.Inc()
		return api.Job{}, invalid(err)
	}
	return s.submit(ctx, decl, nil, progress, req.Secrets)
}

// errNotResumable: the attempt was resumed already, or is not to be.
var errNotResumable = errors.New("not to be resumed")

// resume submits the next attempt of a job: its last attempt's (with
// exact, that of the attempt named, which must still be the last),
// continued from its last checkpoint or, with fromStart, run again. It
// returns the job, under the ID it was submitted with.
func (s *Submitter) resume(ctx context.Context, id string, fromStart, exact bool) (api.Job, error) {
	if a := s.jobs.get(id); a != nil && !exact {
		// An array, or an array held for its upstreams and released.
		if last := s.lastAttempt(a); last.isArrayTracker() {
			if last.isGangTracker() {
				return s.gangs.resume(ctx, last, fromStart)
			}
			return s.resumeArray(ctx, last, fromStart)
		}
	}
	s.resuming.Lock()
	defer s.resuming.Unlock()
	of := s.jobs.get(id)
	if of == nil {
		return api.Job{}, fmt.Errorf("job %s: %w", id, ErrNotFound)
	}
	if exact {
		var failed string
		of.view(func(r *Record) { failed = r.ResumeFailed })
		if failed != "" {
			return api.Job{}, fmt.Errorf("attempt %s: %w: %s", id, errNotResumable, failed)
		}
	}
	if last := s.lastAttempt(of); last != of {
		if exact {
			return api.Job{}, fmt.Errorf("attempt %s: %w as %s", id, errNotResumable, last.id)
		}
		of = last
	}
	decl, err := of.resumption(fromStart)
	if err != nil {
		return api.Job{}, err
	}
	parent := of.snapshot()
	next, err := s.submit(ctx, decl, &parent, nil, nil)
	if err != nil {
		return api.Job{}, err
	}
	// The new attempt is on disk (submit writes it before it broadcasts);
	// a stop before this link is mended at the next start (linkAttempts).
	of.change(func(r *Record) error { r.Next = next.ID; return nil })
	out, _, err := s.view(parent.root(), 0, true)
	return out, err
}

// submit checks, imports, signs and broadcasts a declaration: a new job,
// with secrets the values of its secrets (secretsGiven), or with parent
// the next attempt of parent's job, which reads the job's.
func (s *Submitter) submit(ctx context.Context, decl market.Declaration, parent *Record, progress content.Progress, secrets map[string][]byte) (api.Job, error) {
	// Made exact below, in place: a resumption's declaration shares its
	// data with the record it came from.
	decl.Data = slices.Clone(decl.Data)
	if parent == nil && (len(decl.After) > 0 || len(decl.AfterAny) > 0) {
		return s.submitHeld(ctx, decl, progress, secrets)
	}
	// A held job's first attempt links to its record as a resumption does
	// to the attempt before it, but the network hears of no resumption.
	resumeOf, announcedOf := "", ""
	if parent != nil {
		resumeOf, announcedOf = parent.ID, parent.ID
		if parent.placeholder() {
			announcedOf = ""
		}
	}
	if err := s.resolveJobSources(&decl); err != nil {
		s.d.Metrics.Rejected.Inc()
		return api.Job{}, invalid(err)
	}
	if err := checkLocalSources(decl); err != nil {
		s.d.Metrics.Rejected.Inc()
		return api.Job{}, invalid(err)
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
	if labels == nil && parent != nil {
		labels = maps.Clone(parent.Labels)
	}
	sources, err := importer{&s.parts}.exact(ctx, &decl, progress)
	if err != nil {
		return api.Job{}, err
	}
	if decl.Array != nil {
		a := *decl.Array
		if err := readValuesFile(&a); err != nil {
			s.d.Metrics.Rejected.Inc()
			return api.Job{}, invalid(err)
		}
		decl.Array = &a
	}
	body := wire.DeclarationBody{Declaration: decl, Addrs: s.d.Addrs(), ResumeOf: announcedOf}
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
	if decl.Parts() > 1 {
		return s.announceArray(ctx, sealed, decl, labels, sources, parent)
	}
	now := time.Now()
	rec := &Record{ID: id, Envelope: sealed.Raw, Declaration: decl, Labels: labels, Sources: sources, RecordChain: RecordChain{ResumeOf: resumeOf}, State: api.JobQueued, Submitted: now}
	rec.step(api.StepSubmit, now)
	// Every DAG the provider will fetch stays pinned for the job.
	if err := s.pinContent(ctx, rec); err != nil {
		return api.Job{}, err
	}
	if parent != nil {
		rec.Resumes, rec.Retries = parent.Resumes+1, parent.Retries
		switch {
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
	j := newJobTracker(&s.parts, rec)
	snap := j.snapshot()
	// Saved before it is broadcast: a proposal may arrive at once.
	if err := j.write(&snap); err != nil {
		return api.Job{}, err
	}
	s.jobs.add(j)
	if err := s.d.Gossip.PublishRaw(ctx, p2p.TopicJobs, sealed.Raw); err != nil {
		// Saved and queued: the requeue loop announces it again.
		s.log.Warn("announce job", "job", id, "err", err)
	}
	if parent == nil || !parent.placeholder() {
		s.d.Metrics.Submitted.Inc() // a held job was counted when it was
	}
	s.log.Info("job submitted", "job", id, "name", decl.Name, "gpus", decl.Request.GPUs)
	out := snap.API()
	out.Version = s.versionBase // no change counted yet
	return out, nil
}

// pinContent pins every DAG a provider will fetch for the job: the image
// under its own reason, the inputs and a checkpoint to resume from under
// the inputs'.
func (s *Submitter) pinContent(ctx context.Context, rec *Record) error {
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

// checkLocalSources checks that every local path a declaration stages is
// an absolute path that is there.
func checkLocalSources(decl market.Declaration) error {
	return market.CheckSources(decl, func(path string) (bool, error) {
		if !filepath.IsAbs(path) {
			return false, fmt.Errorf("%q is not an absolute path", path)
		}
		_, err := os.Stat(path)
		if errors.Is(err, os.ErrNotExist) {
			return false, nil
		}
		return err == nil, err
	})
}

// importer makes a declaration's sources exact before it is signed, in
// this node's store: a local path imported, a path inside a CID resolved,
// the image imported, and each sized, so that the signed declaration names
// exact bytes. It keeps no state of its own.
type importer struct{ *parts }

// exact makes decl's data sources and image exact, and returns the sources
// as the user gave them.
func (im importer) exact(ctx context.Context, decl *market.Declaration, progress content.Progress) ([]string, error) {
	sources := make([]string, len(decl.Data))
	for i, in := range decl.Data {
		sources[i] = in.Source
		if c, err := cid.Decode(in.Source); err == nil {
			decl.Data[i].Size = im.sizeOf(ctx, c)
			continue
		}
		if root, p, ok := market.SplitCIDPath(in.Source); ok {
			c, err := im.resolveInDAG(ctx, root, p)
			if err != nil {
				im.d.Metrics.Rejected.Inc()
				return nil, invalid(fmt.Errorf("data[%d].source %s: %w", i, in.Source, err))
			}
			decl.Data[i].Source = c.String()
			decl.Data[i].Size = im.sizeOf(ctx, c)
			continue
		}
		c, size, err := im.d.Store.Import(ctx, in.Source, content.ImportOptions{MaxBytes: im.cfg.MaxInputBytes, Progress: progress, Pin: pinImporting})
		if err != nil {
			if errors.Is(err, content.ErrTooLarge) {
				return nil, invalid(fmt.Errorf("data[%d].source: %w", i, err))
			}
			return nil, fmt.Errorf("import data[%d].source %s: %w", i, in.Source, err)
		}
		decl.Data[i].Source = c.String()
		decl.Data[i].Size = market.Size(min(max(size, 0), market.MaxInputSize))
	}
	if decl.Work.Image != "" {
		if err := im.importImage(ctx, &decl.Work, progress); err != nil {
			im.d.Metrics.Rejected.Inc()
			return nil, err
		}
	}
	return sources, nil
}

// resolveInDAG is the CID of path inside root, which this node must hold: a
// path inside a CID is resolved at submit, so that the signed declaration
// names the exact DAG a provider stages.
func (im importer) resolveInDAG(ctx context.Context, root cid.Cid, path string) (cid.Cid, error) {
	c, err := im.d.Store.Resolve(ctx, root, path)
	if err == nil {
		return c, nil
	}
	if _, rootErr := im.d.Store.Resolve(ctx, root, "."); rootErr != nil {
		return cid.Undef, fmt.Errorf("%w (a path inside a CID is resolved in this node's store, which does not hold %s: it holds the outputs of the jobs submitted here)", err, root)
	}
	return cid.Undef, fmt.Errorf("no %q inside %s: %w", path, root, err)
}

// sizeOf is the size recorded in the declaration for a root it reads: the
// bytes of the DAG when this node holds all of it, else 0 (not known; a
// provider holding it is then not preferred for it).
func (im importer) sizeOf(ctx context.Context, root cid.Cid) market.Size {
	n, err := im.d.Store.Size(ctx, root)
	if err != nil {
		return 0
	}
	return market.Size(min(max(n, 0), market.MaxInputSize))
}

// importImage imports the job's image into the store, as an image that
// e31 image ls lists, and rewrites work.image to its CID so that the signed
// declaration names exact bytes; for a registry image work.image_ref gets
// the reference pinned to the manifest digest, which lets a provider pull
// the same bytes itself. An image already named by CID must be held here.
func (im importer) importImage(ctx context.Context, w *market.Work, progress content.Progress) error {
	if im.d.Images == nil {
		return invalid(errors.New("work.image: this node cannot import images"))
	}
	rec, err := im.d.Images.Import(ctx, w.Image, progress)
	if err != nil {
		if errors.Is(err, image.ErrBadRef) || errors.Is(err, image.ErrNotFound) || errors.Is(err, image.ErrInvalid) ||
			errors.Is(err, image.ErrNoPlatform) || errors.Is(err, image.ErrAmbiguous) || errors.Is(err, image.ErrDigestMismatch) ||
			errors.Is(err, os.ErrNotExist) || errors.Is(err, content.ErrNotFound) || errors.Is(err, content.ErrTooLarge) {
			return invalid(fmt.Errorf("work.image: %w", err))
		}
		return fmt.Errorf("import work.image %s: %w", w.Image, err)
	}
	if len(w.Command) == 0 && len(rec.Entrypoint)+len(rec.Cmd) == 0 {
		return invalid(fmt.Errorf("work.command: is required: image %s has neither Entrypoint nor Cmd to run", w.Image))
	}
	w.Image = rec.CID.String()
	w.ImageSize = im.sizeOf(ctx, rec.CID)
	if w.ImageSize == 0 {
		w.ImageSize = market.Size(min(max(rec.Size, 0), market.MaxInputSize))
	}
	if rec.Pinned != "" {
		w.ImageRef = rec.Pinned
	}
	return nil
}

// resumption builds the declaration of a job that continues this one from
// its last checkpoint: the same work, with the checkpoint laid out at the
// checkpoint path. With fromStart it builds the one that runs it again from
// the beginning instead: its declaration as first submitted.
func (j *jobTracker) resumption(fromStart bool) (market.Declaration, error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	of, r := j.id, j.rec
	if !r.terminal() {
		return market.Declaration{}, conflict(fmt.Errorf("job %s is still %s; withdraw it first", of, r.State))
	}
	if fromStart {
		return fromTheStart(r.Declaration), nil
	}
	cp := r.Declaration.Output.Checkpoints
	if cp == nil {
		return market.Declaration{}, invalid(fmt.Errorf("job %s declares no checkpoints to resume from; e31 resume --from-start %s runs it again from the beginning", of, of))
	}
	d := r.Declaration
	if r.Checkpoint == "" && cp.From != "" {
		// A resumption lost before a checkpoint of its own: the next
		// starts from the same one.
		return d, d.Validate()
	}
	if r.Checkpoint == "" {
		if !r.Resumed {
			return market.Declaration{}, conflict(fmt.Errorf("job %s has no checkpoint yet; e31 resume --from-start %s runs it again from the beginning", of, of))
		}
		// Lost before its first checkpoint: an automatic resume starts it
		// again from the beginning.
		return d, d.Validate()
	}
	// The resumed run finds its last checkpoint at its own checkpoint
	// path, writable, as it left it: the provider lays it out there before
	// the run (market.Checkpoints.From). E31_RESUME_FROM names the path too,
	// for a program that wants to know it was resumed.
	d = fromTheStart(d)
	d.Output.Checkpoints.From = r.Checkpoint
	d.Work.Env = maps.Clone(d.Work.Env)
	if d.Work.Env == nil {
		d.Work.Env = map[string]string{}
	}
	d.Work.Env["E31_RESUME_FROM"] = cp.Path
	return d, d.Validate()
}

// fromTheStart is a job's declaration without what resuming it added: the
// checkpoint to start from and E31_RESUME_FROM, and the input beside the
// checkpoint path that older versions staged it as. The job's own
// variables and inputs stay. Nothing the result holds is shared with d but
// what neither changes.
func fromTheStart(d market.Declaration) market.Declaration {
	if cp := d.Output.Checkpoints; cp != nil {
		c := *cp
		c.From = ""
		d.Output.Checkpoints = &c
		d.Data = slices.DeleteFunc(slices.Clone(d.Data), func(in market.Input) bool { return in.Mount == cp.Path+"-resume" })
		if _, ok := d.Work.Env["E31_RESUME_FROM"]; ok {
			d.Work.Env = maps.Clone(d.Work.Env)
			delete(d.Work.Env, "E31_RESUME_FROM")
		}
	}
	return d
}

// Withdraw withdraws one of this node's jobs: a queued job ends at once
// with nothing owed; a leased one is stopped by its provider and released
// with outcome withdrawn.
func (s *Submitter) Withdraw(ctx context.Context, id string) (api.Job, error) {
	j := s.jobs.get(id)
	if j == nil {
		return api.Job{}, fmt.Errorf("job %s: %w", id, ErrNotFound)
	}
	// A job is withdrawn as its last attempt; an attempt named by its own
	// ID is that one.
	var root string
	var array, gang bool
	j.view(func(r *Record) { root, array, gang = r.Root, r.isArray(), r.isGang() })
	if gang {
		return s.gangs.withdraw(ctx, j, root == "")
	}
	if array {
		return s.withdrawArray(ctx, j)
	}
	if last := s.lastAttempt(j); last != j && last.isArrayTracker() {
		return s.withdrawArray(ctx, last) // an array held for its upstreams, released
	}
	if root != "" {
		return j.withdraw(ctx, true)
	}
	if err := s.withdrawLast(ctx, j, true); err != nil {
		return api.Job{}, err
	}
	out, _, err := s.view(id, 0, true)
	return out, err
}

// withdrawLast withdraws the last attempt of the job first is the first
// attempt of; one lost with its provider and due to be resumed is not
// resumed. Without announce, a task's withdrawal is left to its array's
// (a task that is its own first attempt; a later attempt is a job of its
// own, announced apart).
func (s *Submitter) withdrawLast(ctx context.Context, first *jobTracker, announce bool) error {
	// Held throughout: a resumption or a held job's release does not slip
	// in between finding the last attempt and withdrawing it.
	s.resuming.Lock()
	defer s.resuming.Unlock()
	last := s.lastAttempt(first)
	err := last.update(func(r *Record) error {
		if !r.resumeDue() {
			return errSkip
		}
		r.ResumeFailed = "withdrawn before it was resumed"
		r.Reason += "; withdrawn before it was resumed"
		return nil
	})
	if err == nil {
		return nil
	}
	if err != errSkip {
		return err
	}
	_, err = last.withdraw(ctx, announce || last != first)
	return err
}

// withdraw withdraws the job (Withdraw): its record first, then the
// announcement, when announce is set, and, for a leased job, the word to
// its provider.
func (j *jobTracker) withdraw(ctx context.Context, announce bool) (api.Job, error) {
	id := j.id
	var provider peer.ID
	var lease string
	var badProvider error
	var out api.Job
	announced := true
	err := j.update(func(r *Record) error {
		if r.terminal() {
			return conflict(fmt.Errorf("job %s is already %s", id, r.State))
		}
		announced = !r.placeholder()
		if r.State == api.JobQueued {
			r.State = api.JobWithdrawn
			r.setEnding(ledger.Ending{Outcome: ledger.OutcomeWithdrawn, Attribution: ledger.AttributionSubmitter})
			r.Wait = ""
		} else {
			r.Withdrawn = true
			lease = r.Lease.Terms.ID
			// Checked when the lease was accepted (HandleProposal); one
			// that does not decode now was damaged on disk since.
			provider, badProvider = peer.Decode(r.Lease.Terms.Provider)
		}
		out = r.API()
		return nil
	})
	if err != nil && out.ID == "" {
		return api.Job{}, err
	}
	if err != nil {
		// Withdrawn in memory; the withdrawal goes out all the same, and a
		// restart would find the job as it was before.
		j.log.Warn("withdrawal not persisted", "job", id, "err", err)
	}
	if badProvider != nil {
		// The provider still hears of it from the announcement below.
		j.log.Error("withdrawal: the lease names a bad provider, not told directly", "job", id, "lease", lease, "err", badProvider)
	}
	if !announced && provider == "" {
		return out, nil // held for its upstreams: the network never heard of it
	}
	if announce {
		if _, err := j.d.Gossip.Publish(ctx, p2p.TopicJobs, wire.KindWithdrawal, wire.WithdrawalBody{Job: id}); err != nil {
			j.log.Warn("announce withdrawal", "job", id, "err", err)
		}
	}
	if provider != "" {
		if err := j.d.Calls.Call(ctx, provider, wire.ProtoWithdraw, wire.WithdrawRequest{Lease: lease, Job: id}, nil); err != nil {
			j.log.Warn("tell provider of withdrawal", "job", id, "err", err)
		}
	}
	return out, nil
}

// resolveJobSources replaces each data source job:JOB/PATH with the CID
// path of that job's output: JOB a job of this node (an ID or a unique
// prefix) that has returned its output.
func (s *Submitter) resolveJobSources(d *market.Declaration) error {
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
		j, err := s.Job(id)
		if err != nil {
			return fmt.Errorf("%s: %w", f, err)
		}
		if j.Tasks != nil {
			root, err := s.arrayOutput(s.ctx, j)
			if err != nil {
				return fmt.Errorf("%s: %w", f, err)
			}
			j.Output = root.String()
		}
		if j.Output == "" {
			return fmt.Errorf("%s: job %s has no output (it is %s%s)", f, j.ID, j.State, outcomeSuffix(j))
		}
		d.Data[i].Source = j.Output + "/" + sub
	}
	return nil
}

func outcomeSuffix(j api.Job) string {
	if j.Outcome == "" {
		return ""
	}
	return ", " + j.Outcome
}
