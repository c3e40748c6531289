package submitter

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/e31network/e31/content"
	"github.com/e31network/e31/content/image"
	"github.com/e31network/e31/ledger"
	"github.com/e31network/e31/market"
	"github.com/e31network/e31/node/api"
	"github.com/e31network/e31/node/state"
	"github.com/e31network/e31/node/task"
	"github.com/e31network/e31/node/view"
	"github.com/e31network/e31/node/wire"
	"github.com/e31network/e31/p2p"
	"github.com/ipfs/go-cid"
	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/protocol"
	"github.com/prometheus/client_golang/prometheus"
)

// Errors the API maps to statuses (node/apiserver).
var (
	// ErrNotFound: no such job on this node.
	ErrNotFound = errors.New("not found")
	// ErrInvalid: the request itself is wrong (a bad declaration, an
	// ambiguous ID prefix); retrying it as is cannot succeed.
	ErrInvalid = errors.New("invalid request")
	// ErrConflict: the request does not fit the job's state (withdrawing a
	// released job, fetching an output not there yet).
	ErrConflict = errors.New("conflict with the job's state")
)

// invalid marks err as the caller's mistake, keeping its text.
func invalid(err error) error { return fmt.Errorf("%w%w", err, errMark{ErrInvalid}) }

// conflict marks err as a conflict with the job's state.
func conflict(err error) error { return fmt.Errorf("%w%w", err, errMark{ErrConflict}) }

// errMark adds a sentinel to an error's chain without adding to its text.
type errMark struct{ err error }

func (m errMark) Error() string { return "" }
func (m errMark) Unwrap() error { return m.err }

// What the submitter needs from the rest of the node.
type (
	// Store is the local content store (content.Store).
	Store interface {
		Import(ctx context.Context, path string, o content.ImportOptions) (cid.Cid, int64, error)
		Pin(ctx context.Context, root cid.Cid, reason string) error
		Unpin(ctx context.Context, root cid.Cid, reason string) error
	}
	// Fetcher fetches a DAG from a peer (content.Exchange).
	Fetcher interface {
		Fetch(ctx context.Context, from peer.ID, root cid.Cid, o content.FetchOptions) (content.FetchStats, error)
	}
	// Ledger stores receipts (ledger.Ledger).
	Ledger interface {
		Append(ctx context.Context, r ledger.Receipt) (ledger.Entry, error)
		AppendOneSided(ctx context.Context, r ledger.Receipt) (ledger.Entry, error)
		RecordDispute(ctx context.Context, lease string, ours, theirs ledger.Receipt) (ledger.Entry, error)
		Lease(ctx context.Context, lease string) (ledger.LeaseRecord, error)
		ByLease(ctx context.Context, lease string) ([]ledger.Entry, error)
	}
	// Caller sends a request over a direct stream and reads the reply.
	Caller interface {
		Call(ctx context.Context, to peer.ID, proto protocol.ID, req, resp any) error
	}
	// Publisher publishes on a gossip topic (p2p.Gossip).
	Publisher interface {
		Publish(ctx context.Context, topic, kind string, body any) (p2p.Signed, error)
		PublishRaw(ctx context.Context, topic string, raw []byte) error
	}
	// Offers is the offer view (view.Offers).
	Offers interface {
		Get(provider string) (view.OfferEntry, bool)
	}
	// Leases tells which leases the network has heard of (view.Market).
	Leases interface {
		LeaseParties(id string) (provider, submitter string, ok bool)
	}
	// Access grants peers the right to fetch content (acl.List).
	Access interface {
		Allow(p peer.ID, root cid.Cid)
	}
	// Images imports the image a declaration names (images.Library).
	Images interface {
		Import(ctx context.Context, ref string, progress content.Progress) (image.Record, error)
	}
	// Records persists job records (state.Store).
	Records interface {
		Put(prefix, id string, v any) error
		Each(prefix string, fn func(b []byte) error) error
		Get(prefix, id string, v any) (bool, error)
	}
)

// Config holds the submitter's settings; see node.Config.
type Config struct {
	ProposalTTL       time.Duration
	Heartbeat         time.Duration
	OutputTimeout     time.Duration
	ProviderLostAfter time.Duration
	MaxInputBytes     int64
	MaxOutputBytes    int64
	// RequeueEvery is how often queued jobs are re-announced.
	RequeueEvery time.Duration
	// NoLocality and LocalityWait fill in request.locality and
	// request.locality_wait of a declaration that sets neither (the
	// daemon's --no-locality and --locality-wait). They go into the signed
	// declaration, so every peer matches the job alike.
	NoLocality   bool
	LocalityWait time.Duration
	// AvoidAfter is how long a provider that Match keeps assigning a
	// queued job may go without proposing before the job avoids it; zero:
	// never.
	AvoidAfter time.Duration
	// RunWithin is how long a lease may go with neither the run started
	// nor a receipt offered before the submitter releases it, as never
	// run, and puts the job back in the queue avoiding the provider; zero:
	// never.
	RunWithin time.Duration
	// ReceiptsDue is how long a lease that reached its run may go without
	// a receipt to countersign before the submitter ends it on its side;
	// zero: never.
	ReceiptsDue time.Duration
}

// Deps are the parts of the node the submitter acts through.
type Deps struct {
	Key     crypto.PrivKey
	Self    peer.ID
	Store   Store
	Fetcher Fetcher
	Ledger  Ledger
	Calls   Caller
	Gossip  Publisher
	Offers  Offers
	Leases  Leases
	Access  Access
	Records Records
	// Images is nil on a node that cannot import images: a declaration
	// with work.image is then refused.
	Images  Images
	Metrics *Metrics
	Log     *slog.Logger
	// Path says how this node is connected to a peer and, when only
	// through a relay, what the last hole punch said; nil: always direct.
	Path func(peer.ID) (p2p.Path, string)
	// Addrs are this node's addresses, put in each declaration so that
	// providers can reach it with a proposal.
	Addrs func() []string
}

// Metrics are the submitter's counters, registered by the node.
type Metrics struct {
	Submitted     prometheus.Counter
	Rejected      prometheus.Counter
	Receipts      prometheus.Counter
	PersistErrors prometheus.Counter
	Returned      content.Progress
	// Panics counts the panics recovered in the submitter's goroutines
	// (e31_panics_total{where="task"}); nil: uncounted.
	Panics prometheus.Counter
}

// Submitter follows the jobs this node submitted through their five steps.
type Submitter struct {
	// Immutable after New.
	cfg Config
	d   Deps
	log *slog.Logger
	// ctx ends when Shutdown starts.
	ctx    context.Context
	cancel context.CancelFunc
	tasks  task.Group

	mu sync.Mutex // guards jobs, ended, each job's rec, lastContact, evicted and dirty, and joined; never held across I/O
	// jobs holds the jobs this node submitted that are live or ended
	// recently; the others are in the record store only (memory.go).
	jobs map[string]*job
	// pass numbers this node's Match passes, for job.passes; guarded by
	// mu.
	pass uint64
	// ended holds the state of every job that is in the store only.
	ended  map[string]api.JobState
	joined time.Time // when the first offer of another provider arrived

	stage stageState // reservations and holders, for staging from many sources

	// versionBase starts the versions of this run's jobs (api.Job.Version)
	// where no earlier run's reached: a version is a job's count of
	// changes in this run on top of it, so that a client that kept a
	// version across a restart is not told of a change it already saw.
	versionBase uint64
}

// New returns a submitter; Recover loads what a previous run left.
func New(cfg Config, d Deps) *Submitter {
	ctx, cancel := context.WithCancel(context.Background())
	s := &Submitter{cfg: cfg, d: d, log: d.Log, ctx: ctx, cancel: cancel, jobs: make(map[string]*job), ended: make(map[string]api.JobState),
		versionBase: uint64(time.Now().UnixMilli()) << 20}
	// A goroutine of the submitter's (a checkpoint's pull from a provider,
	// a loop) that panics loses its work, not the daemon.
	s.tasks.OnPanic = func(v any, stack []byte) {
		s.log.Error("panic recovered", "where", "task", "panic", fmt.Sprint(v), "stack", string(stack))
		if d.Metrics != nil && d.Metrics.Panics != nil {
			d.Metrics.Panics.Inc()
		}
	}
	return s
}

// Shutdown stops the submitter's loops and transfers and waits for them:
// it reports whether they ended before ctx did, and in any case returns only
// once they have (all of them end with the submitter's context), so that
// nothing writes to a store after it is closed.
func (s *Submitter) Shutdown(ctx context.Context) error {
	s.cancel()
	err := s.tasks.Wait(ctx)
	if err != nil {
		s.log.Warn("submitter still finishing at shutdown", "err", err)
	}
	_ = s.tasks.Wait(context.Background())
	return err
}

// Start runs the submitter's loops (provider watch, requeue) until
// Shutdown.
func (s *Submitter) Start() {
	s.tasks.Go(func() { s.watchProviders(s.ctx) })
	s.tasks.Go(func() { s.requeueLoop(s.ctx) })
	s.tasks.Go(func() { s.evictLoop(s.ctx) })
}

// Joined records that another provider's offer arrived: silence of a
// provider counts from then, not from before this node was in touch.
func (s *Submitter) Joined(at time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.joined.IsZero() {
		s.joined = at
	}
}

// update changes a job's record under the lock and persists it after. When
// fn returns an error nothing changes and nothing is written.
func (s *Submitter) update(j *job, fn func(r *Record) error) error {
	j.save.Lock()
	s.mu.Lock()
	if j.evicted {
		// Left memory while the caller held it: the change goes to the
		// job as it is now.
		s.mu.Unlock()
		j.save.Unlock()
		cur := s.get(j.id)
		if cur == nil {
			return fmt.Errorf("job %s: %w", j.id, ErrNotFound)
		}
		return s.update(cur, fn)
	}
	defer j.save.Unlock()
	if err := fn(j.rec); err != nil {
		s.mu.Unlock()
		return err
	}
	j.bump()
	if j.rec.terminal() {
		// The signed declaration is re-announced only while the job is
		// queued; an ended job does not carry it.
		j.rec.Envelope = nil
		if j.endedAt.IsZero() {
			j.endedAt = time.Now()
		}
	}
	snap := j.rec.copy()
	s.mu.Unlock()
	err := s.write(&snap)
	s.mu.Lock()
	j.dirty = err != nil
	s.mu.Unlock()
	return err
}

// change is update for a change the job goes on with whether or not it
// reaches the disk: a failed write is logged and counted (write), the
// record in memory stays this run's truth, and the next change writes it
// again whole.
func (s *Submitter) change(j *job, fn func(r *Record) error) {
	s.update(j, fn) //nolint:errcheck // logged and counted by write, or nothing to change
}

func (s *Submitter) write(r *Record) error {
	if err := s.d.Records.Put(state.PrefixJob, r.ID, r); err != nil {
		s.d.Metrics.PersistErrors.Inc()
		s.log.Error("persist job", "job", r.ID, "err", err)
		return fmt.Errorf("persist job %s: %w", r.ID, err)
	}
	return nil
}

// get returns a job, from memory or the record store, or nil.
func (s *Submitter) get(id string) *job {
	s.mu.Lock()
	j := s.jobs[id]
	s.mu.Unlock()
	if j != nil {
		return j
	}
	return s.load(id)
}

// Pin reasons of what a submitter keeps for a job.
func pinInput(job string) string  { return "input of job " + job }
func pinOutput(job string) string { return "output of job " + job }
func pinImage(job string) string  { return "image of job " + job }
func pinCheckpoint(job string, n int) string {
	return fmt.Sprintf("checkpoint %d of job %s", n, job)
}

// pinImporting holds an input between its import and the job's own pin.
const pinImporting = "input of a submitted job"

// Submit validates a declaration (or, with req.ResumeOf, builds the one
// that resumes that job, or runs it again with req.FromStart), imports its
// local inputs, signs it and broadcasts it. Nothing is broadcast for a
// declaration that fails any check.
func (s *Submitter) Submit(ctx context.Context, req api.SubmitRequest, progress content.Progress) (api.Job, error) {
	var decl market.Declaration
	resumeOf := req.ResumeOf
	if resumeOf != "" {
		d, err := s.resumeDeclaration(resumeOf, req.FromStart)
		if err != nil {
			return api.Job{}, err
		}
		decl = d
	} else {
		d, err := market.DecodeDeclaration(req.Declaration)
		if err != nil {
			s.d.Metrics.Rejected.Inc()
			return api.Job{}, invalid(err)
		}
		decl = d
	}
	if err := market.CheckSources(decl, func(path string) (bool, error) {
		if !filepath.IsAbs(path) {
			return false, fmt.Errorf("%q is not an absolute path", path)
		}
		_, err := os.Stat(path)
		if errors.Is(err, os.ErrNotExist) {
			return false, nil
		}
		return err == nil, err
	}); err != nil {
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
	sources := make([]string, len(decl.Data))
	for i, in := range decl.Data {
		sources[i] = in.Source
		if c, err := cid.Decode(in.Source); err == nil {
			decl.Data[i].Size = s.sizeOf(ctx, c)
			continue
		}
		if root, p, ok := market.SplitCIDPath(in.Source); ok {
			c, err := s.resolveInDAG(ctx, root, p)
			if err != nil {
				s.d.Metrics.Rejected.Inc()
				return api.Job{}, invalid(fmt.Errorf("data[%d].source %s: %w", i, in.Source, err))
			}
			decl.Data[i].Source = c.String()
			decl.Data[i].Size = s.sizeOf(ctx, c)
			continue
		}
		c, size, err := s.d.Store.Import(ctx, in.Source, content.ImportOptions{MaxBytes: s.cfg.MaxInputBytes, Progress: progress, Pin: pinImporting})
		if err != nil {
			if errors.Is(err, content.ErrTooLarge) {
				return api.Job{}, invalid(fmt.Errorf("data[%d].source: %w", i, err))
			}
			return api.Job{}, fmt.Errorf("import data[%d].source %s: %w", i, in.Source, err)
		}
		decl.Data[i].Source = c.String()
		decl.Data[i].Size = market.Size(min(max(size, 0), market.MaxInputSize))
	}
	if decl.Work.Image != "" {
		if err := s.importImage(ctx, &decl.Work, progress); err != nil {
			s.d.Metrics.Rejected.Inc()
			return api.Job{}, err
		}
	}
	body := wire.DeclarationBody{Declaration: decl, Addrs: s.d.Addrs(), ResumeOf: resumeOf}
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
	now := time.Now()
	rec := &Record{ID: id, Envelope: sealed.Raw, Declaration: decl, Sources: sources, ResumeOf: resumeOf, State: api.JobQueued, Submitted: now}
	rec.step(api.StepSubmit, now)
	// Every DAG the provider will fetch stays pinned for the job: the image
	// under its own reason, the inputs and a checkpoint to resume from
	// under the inputs'.
	for _, c := range rec.contentRoots() {
		reason := pinInput(id)
		if c.String() == decl.Work.Image {
			reason = pinImage(id)
		}
		if err := s.d.Store.Pin(ctx, c, reason); err != nil {
			return api.Job{}, fmt.Errorf("pin %s: %w", c, err)
		}
	}
	j := &job{id: id, rec: rec}
	if resumeOf != "" {
		if parent := s.get(resumeOf); parent != nil {
			s.mu.Lock()
			rec.Resumes = parent.rec.Resumes + 1
			s.mu.Unlock()
		}
	}
	s.mu.Lock()
	snap := rec.copy()
	s.mu.Unlock()
	// Saved before it is broadcast: a proposal may arrive at once.
	if err := s.write(&snap); err != nil {
		return api.Job{}, err
	}
	s.mu.Lock()
	s.jobs[id] = j
	s.mu.Unlock()
	if err := s.d.Gossip.PublishRaw(ctx, p2p.TopicJobs, sealed.Raw); err != nil {
		// Saved and queued: the requeue loop announces it again.
		s.log.Warn("announce job", "job", id, "err", err)
	}
	s.d.Metrics.Submitted.Inc()
	s.log.Info("job submitted", "job", id, "name", decl.Name, "gpus", decl.Request.GPUs)
	out := snap.API()
	out.Version = s.versionBase // no change counted yet
	return out, nil
}

// sizer says how many bytes a DAG held here takes (content.Store).
type sizer interface {
	Size(ctx context.Context, root cid.Cid) (int64, error)
}

// sizeOf is the size recorded in the declaration for a root it reads: the
// bytes of the DAG when this node holds all of it, else 0 (not known; a
// provider holding it is then not preferred for it).
// resolver finds a file or folder inside a DAG held here (content.Store).
type resolver interface {
	Resolve(ctx context.Context, root cid.Cid, path string) (cid.Cid, error)
}

// resolveInDAG is the CID of path inside root, which this node must hold: a
// path inside a CID is resolved at submit, so that the signed declaration
// names the exact DAG a provider stages.
func (s *Submitter) resolveInDAG(ctx context.Context, root cid.Cid, path string) (cid.Cid, error) {
	r, ok := s.d.Store.(resolver)
	if !ok {
		return cid.Undef, errors.New("this node cannot look inside a CID")
	}
	c, err := r.Resolve(ctx, root, path)
	if err == nil {
		return c, nil
	}
	if _, rootErr := r.Resolve(ctx, root, "."); rootErr != nil {
		return cid.Undef, fmt.Errorf("%w (a path inside a CID is resolved in this node's store, which does not hold %s: it holds the outputs of the jobs submitted here)", err, root)
	}
	return cid.Undef, fmt.Errorf("no %q inside %s: %w", path, root, err)
}

func (s *Submitter) sizeOf(ctx context.Context, root cid.Cid) market.Size {
	sz, ok := s.d.Store.(sizer)
	if !ok {
		return 0
	}
	n, err := sz.Size(ctx, root)
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
func (s *Submitter) importImage(ctx context.Context, w *market.Work, progress content.Progress) error {
	if s.d.Images == nil {
		return invalid(errors.New("work.image: this node cannot import images"))
	}
	rec, err := s.d.Images.Import(ctx, w.Image, progress)
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
	w.ImageSize = s.sizeOf(ctx, rec.CID)
	if w.ImageSize == 0 {
		w.ImageSize = market.Size(min(max(rec.Size, 0), market.MaxInputSize))
	}
	if rec.Pinned != "" {
		w.ImageRef = rec.Pinned
	}
	return nil
}

// resumeDeclaration builds the declaration of a job that continues another
// from its last checkpoint: the same work, with the checkpoint laid out at
// the checkpoint path. fromStart builds the one that runs it again from the
// beginning instead: its declaration as first submitted.
func (s *Submitter) resumeDeclaration(of string, fromStart bool) (market.Declaration, error) {
	j := s.get(of)
	s.mu.Lock()
	defer s.mu.Unlock()
	if j == nil {
		return market.Declaration{}, fmt.Errorf("job %s: %w", of, ErrNotFound)
	}
	r := j.rec
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
	j := s.get(id)
	if j == nil {
		return api.Job{}, fmt.Errorf("job %s: %w", id, ErrNotFound)
	}
	var provider peer.ID
	var lease string
	var out api.Job
	err := s.update(j, func(r *Record) error {
		if r.terminal() {
			return conflict(fmt.Errorf("job %s is already %s", id, r.State))
		}
		if r.State == api.JobQueued {
			r.State = api.JobWithdrawn
			r.Outcome, r.Attribution = ledger.OutcomeWithdrawn, ledger.AttributionSubmitter
			r.Wait = ""
		} else {
			r.Withdrawn = true
			provider, _ = peer.Decode(r.Lease.Terms.Provider)
			lease = r.Lease.Terms.ID
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
		s.log.Warn("withdrawal not persisted", "job", id, "err", err)
	}
	if _, err := s.d.Gossip.Publish(ctx, p2p.TopicJobs, wire.KindWithdrawal, wire.WithdrawalBody{Job: id}); err != nil {
		s.log.Warn("announce withdrawal", "job", id, "err", err)
	}
	if provider != "" {
		if err := s.d.Calls.Call(ctx, provider, wire.ProtoWithdraw, wire.WithdrawRequest{Lease: lease, Job: id}, nil); err != nil {
			s.log.Warn("tell provider of withdrawal", "job", id, "err", err)
		}
	}
	return out, nil
}

// Jobs lists this node's jobs, oldest first.
func (s *Submitter) Jobs() []api.Job {
	s.mu.Lock()
	out := make([]api.Job, 0, len(s.jobs)+len(s.ended))
	for _, j := range s.jobs {
		out = append(out, s.apiJob(j))
	}
	stored := len(s.ended) > 0
	s.mu.Unlock()
	if stored {
		out = append(out, s.storedJobs()...)
	}
	slices.SortFunc(out, func(a, b api.Job) int {
		if c := a.Submitted.Compare(b.Submitted); c != 0 {
			return c
		}
		return strings.Compare(a.ID, b.ID)
	})
	return out
}

// Job returns one job by its ID or a unique prefix of it.
func (s *Submitter) Job(id string) (api.Job, error) {
	j, err := s.find(id)
	if err != nil {
		return api.Job{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.apiJob(j), nil
}

// apiJob renders a job for the API, with its version. The caller holds
// s.mu.
func (s *Submitter) apiJob(j *job) api.Job {
	out := j.rec.API()
	out.Version = s.versionBase + j.version
	return out
}

// WaitJob returns a job once it is at another version than seen, or has
// ended, or when ctx ends, whichever comes first: a client that follows a
// job asks again with the version it last got, and hears of each change as
// it is made instead of on its next poll. At ctx's end it returns the job as
// it is, without error. A change is counted as it is made in memory, before
// it is on disk, and a change that left the job as it was may count too:
// a follower may be woken to find nothing new.
func (s *Submitter) WaitJob(ctx context.Context, id string, seen uint64) (api.Job, error) {
	for {
		j, err := s.find(id)
		if err != nil {
			return api.Job{}, err
		}
		s.mu.Lock()
		if s.versionBase+j.version != seen || j.rec.terminal() || ctx.Err() != nil || j.evicted {
			out := s.apiJob(j)
			s.mu.Unlock()
			return out, nil
		}
		if j.changed == nil {
			j.changed = make(chan struct{})
		}
		changed := j.changed
		s.mu.Unlock()
		select {
		case <-changed:
		case <-ctx.Done():
		}
	}
}

// Counts returns how many jobs are in each state, for metrics.
func (s *Submitter) Counts() map[api.JobState]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[api.JobState]int)
	for _, j := range s.jobs {
		out[j.rec.State]++
	}
	for _, st := range s.ended {
		out[st]++
	}
	return out
}

// find resolves a job ID or a unique prefix of one, among the jobs in
// memory and those in the store only, and returns the job.
func (s *Submitter) find(id string) (*job, error) {
	s.mu.Lock()
	full, err := s.resolve(id)
	s.mu.Unlock()
	if err != nil {
		return nil, err
	}
	if j := s.get(full); j != nil {
		return j, nil
	}
	return nil, fmt.Errorf("job %s: %w", id, ErrNotFound)
}

// resolve finds the full ID of a job from a unique prefix. The caller
// holds s.mu.
func (s *Submitter) resolve(id string) (string, error) {
	if _, ok := s.jobs[id]; ok {
		return id, nil
	}
	if _, ok := s.ended[id]; ok {
		return id, nil
	}
	found := ""
	for _, ids := range []iter.Seq[string]{maps.Keys(s.jobs), maps.Keys(s.ended)} {
		for k := range ids {
			if id != "" && strings.HasPrefix(k, id) {
				if found != "" {
					return "", invalid(fmt.Errorf("job ID prefix %q is ambiguous", id))
				}
				found = k
			}
		}
	}
	if found == "" {
		return "", fmt.Errorf("job %s: %w (only jobs submitted from this node are known here)", id, ErrNotFound)
	}
	return found, nil
}

// Recover loads this node's jobs from the record store, so that a restart
// forgets nothing: submitted jobs are listed again and go on waiting for
// their provider, which may fetch their inputs again.
func (s *Submitter) Recover() error {
	var recs []*Record
	err := s.d.Records.Each(state.PrefixJob, func(b []byte) error {
		var r Record
		if err := json.Unmarshal(b, &r); err != nil {
			return fmt.Errorf("job record: %w", err)
		}
		recs = append(recs, &r)
		return nil
	})
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, r := range recs {
		if r.terminal() {
			// Ended before this start: listed from the store, loaded
			// when asked for.
			s.ended[r.ID] = r.State
			continue
		}
		s.jobs[r.ID] = &job{id: r.ID, rec: r}
		if r.Lease == nil {
			continue
		}
		if p, err := peer.Decode(r.Lease.Terms.Provider); err == nil {
			for _, c := range r.contentRoots() {
				s.d.Access.Allow(p, c)
			}
		}
	}
	return nil
}

// RecordWaits keeps, for this node's queued jobs, the reason Match gave.
func (s *Submitter) RecordWaits(res market.Result) {
	s.mu.Lock()
	defer s.mu.Unlock()
	wait := func(id, why string) {
		if j, ok := s.jobs[id]; ok && j.rec.State == api.JobQueued && j.rec.Wait != why {
			j.rec.Wait = why
			j.bump()
		}
	}
	for _, w := range res.Waiting {
		wait(w.Job, w.Reason)
	}
	for _, a := range res.Assignments {
		wait(a.Job, "matched to provider "+a.Provider+"; waiting for its proposal")
	}
	s.noteAssignments(res, time.Now())
}

// Output returns the CID of a job's output (or last checkpoint), with the
// job's full ID.
func (s *Submitter) Output(id string, checkpoint bool) (jobID string, root cid.Cid, err error) {
	j, err := s.find(id)
	if err != nil {
		return "", cid.Undef, err
	}
	s.mu.Lock()
	r := j.rec
	which, what := r.Output, "output"
	if checkpoint {
		which, what = r.Checkpoint, "checkpoint"
	}
	jobID, st := r.ID, r.State
	s.mu.Unlock()
	if which == "" {
		return jobID, cid.Undef, conflict(fmt.Errorf("job %s has no %s yet (state %s)", jobID, what, st))
	}
	c, err := cid.Decode(which)
	if err != nil {
		return jobID, cid.Undef, fmt.Errorf("job %s %s %q: %w", jobID, what, which, err)
	}
	return jobID, c, nil
}

// FullID resolves a job ID prefix; an unknown one is returned as given.
func (s *Submitter) FullID(id string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if full, err := s.resolve(id); err == nil {
		return full
	}
	return id
}
