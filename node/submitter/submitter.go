package submitter

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/e31network/e31/content"
	"github.com/e31network/e31/content/image"
	"github.com/e31network/e31/ledger"
	"github.com/e31network/e31/node/state"
	"github.com/e31network/e31/node/task"
	"github.com/e31network/e31/node/view"
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
	// Store is the local content store (content.Store). Every method is
	// part of it, none found by type assertion: a store without Size
	// would leave every input unsized, one without Resolve refuse every
	// CID/PATH source, one without Open lose the logs that came back with
	// an output, each in silence.
	Store interface {
		Import(ctx context.Context, path string, o content.ImportOptions) (cid.Cid, int64, error)
		Pin(ctx context.Context, root cid.Cid, reason string) error
		Unpin(ctx context.Context, root cid.Cid, reason string) error
		// Size says how many bytes a DAG held here takes.
		Size(ctx context.Context, root cid.Cid) (int64, error)
		// Folder links DAGs held here into a folder: an array's outputs,
		// one entry a task.
		Folder(ctx context.Context, entries []content.FolderEntry, reason string) (cid.Cid, error)
		// LogStore finds a file or folder inside a DAG held here
		// (Resolve) and reads a file (Open).
		LogStore
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
		HeldByJobs(ctx context.Context, policy ledger.Policy, jobs ...string) (ledger.JobHeld, error)
		KeepLease(ctx context.Context, ev ledger.LeaseEvidence) error
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
		PutAll(prefix string, items []state.Item) error
		Each(prefix string, fn func(b []byte) error) error
		Get(prefix, id string, v any) (bool, error)
		Delete(prefix, id string) error
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
	// TaskBatchEvery is how often the leases and releases of this node's
	// arrays' tasks are announced, together (taskbatch.go).
	TaskBatchEvery time.Duration
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
	// AvoidFor is how long a provider's first avoid for a job lasts; each
	// later one lasts twice the one before, up to wire.MaxAvoidFor. Zero:
	// DefaultAvoidFor.
	AvoidFor time.Duration
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
	// through a relay, which (one that carries data) or what the last hole
	// punch said; nil: always direct.
	Path func(peer.ID) (p2p.Path, string)
	// Addrs are this node's addresses, put in each declaration so that
	// providers can reach it with a proposal.
	Addrs func() []string
	// Placement says whether this node's Match, on its view as it stands,
	// gives a job to a provider: a proposal no epoch's pass of this node
	// gave the provider is countersigned only if it does (claims.go).
	// nil: only epoch passes count.
	Placement Placement
	// Reach connects to a peer, unless connected already: before a
	// provider that has not proposed is avoided, this node tries to reach
	// it, for one that cannot reach this node is no squatter. nil: never
	// tried.
	Reach func(ctx context.Context, p peer.ID) error
}

// Metrics are the submitter's counters, registered by the node.
type Metrics struct {
	Submitted     prometheus.Counter
	Rejected      prometheus.Counter
	Receipts      prometheus.Counter
	PersistErrors prometheus.Counter
	Returned      content.Progress
	// RoundsLost counts the epoch passes of this node's Match that
	// assigned one of its queued jobs to a provider when the job was
	// still queued at the next epoch's pass: no lease came of that round
	// (market/doc.go, "Claims"). nil: uncounted.
	RoundsLost prometheus.Counter
	// Panics counts the panics recovered in the submitter's goroutines
	// (e31_panics_total{where="task"}); nil: uncounted.
	Panics prometheus.Counter
}

// parts are the settings and parts of the node that the Submitter and each
// of its jobTrackers act through, shared by all of them. Immutable after
// New.
type parts struct {
	cfg Config
	d   Deps
	log *slog.Logger
	// versionBase starts the versions of this run's jobs (api.Job.Version)
	// where no earlier run's reached: a version is a job's count of
	// changes in this run on top of it, so that a client that kept a
	// version across a restart is not told of a change it already saw.
	versionBase uint64
	// reload returns the tracker of a job now in memory, loading it from
	// the record store, or nil (registry.get): a tracker that left memory
	// while a caller held it sends the caller's change there.
	reload func(id string) *jobTracker
	// batch gathers the tasks' leases and releases to announce.
	batch *taskAnnouncer
	// tallies counts the tasks of the arrays viewed (tally.go).
	tallies *tallies
	// served is what this node served each peer lately (rate.go).
	served *servedRate
	// secrets holds the values of the jobs' secrets (secrets.go).
	secrets *secretStore
}

// Submitter follows the jobs this node submitted through their five steps.
// Each job has its jobTracker (tracker.go), which holds the job's record
// and handles what its provider sends; the Submitter keeps the registry of
// them (registry.go), the loops over all of them (the provider watch, the
// requeue, the eviction), Submit, Recover and the queries, and routes each
// provider's stream to the job's tracker (handlers.go).
type Submitter struct {
	// Immutable after New.
	parts
	// ctx ends when Shutdown starts.
	ctx    context.Context
	cancel context.CancelFunc
	tasks  task.Group
	// kit holds the registry of jobs (jobs) and the resuming lock, and
	// makes the handle of each job (chain, arrayRun, heldJob, gang); in
	// submits new jobs. Both immutable after New.
	*kit
	in *intake

	// mu guards joined and pass. A state lock: never held across I/O, nor
	// while taking another lock.
	mu     sync.Mutex
	joined time.Time // when the first offer of another provider arrived
	// pass numbers this node's Match passes, for jobTracker.passes.
	pass uint64

	stage stageState // reservations and holders, for staging from many sources
	// claims checks proposals (claims.go); immutable after New.
	claims claimCheck
}

// New returns a submitter; Recover loads what a previous run left.
func New(cfg Config, d Deps) *Submitter {
	ctx, cancel := context.WithCancel(context.Background())
	if cfg.TaskBatchEvery <= 0 {
		cfg.TaskBatchEvery = DefaultTaskBatchEvery
	}
	s := &Submitter{parts: parts{cfg: cfg, d: d, log: d.Log, versionBase: uint64(time.Now().UnixMilli()) << 20, batch: &taskAnnouncer{}, tallies: &tallies{}, served: &servedRate{},
		secrets: &secretStore{records: d.Records}},
		ctx: ctx, cancel: cancel}
	s.kit = &kit{parts: &s.parts, jobs: newRegistry(&s.parts)}
	s.in = &intake{s.kit}
	s.kit.in = s.in
	s.reload = s.jobs.get
	s.stage.parts = &s.parts
	s.claims = claimCheck{parts: &s.parts, stage: &s.stage, pass: func() uint64 {
		s.mu.Lock()
		defer s.mu.Unlock()
		return s.pass
	}}
	// A goroutine of the submitter's (a checkpoint's pull from a provider,
	// a loop) that panics loses its work, not the daemon.
	s.tasks.OnPanic = func(v any, stack []byte) {
		s.log.Error("panic recovered", "where", "task", "panic", fmt.Sprint(v), "stack", string(stack))
		if d.Metrics != nil && d.Metrics.Panics != nil {
			d.Metrics.Panics.Inc()
		}
	}
	s.gangs = newGangs(ctx, &s.parts, s.kit, s.jobs, &s.tasks, &s.resuming)
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

// Start runs the submitter's loops (provider watch, requeue, each gang's
// run) until Shutdown.
func (s *Submitter) Start() {
	s.tasks.Go(func() { s.watchProviders(s.ctx) })
	s.tasks.Go(func() { s.requeueLoop(s.ctx) })
	s.tasks.Go(func() { s.taskBatchLoop(s.ctx) })
	s.tasks.Go(func() { s.evictLoop(s.ctx) })
	s.tasks.Go(func() { s.resumeDueAtStart(s.ctx) })
	s.tasks.Go(func() { s.holdLoop(s.ctx) })
	s.tasks.Go(func() { s.secretsLoop(s.ctx) })
	s.gangs.start()
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

// Pin reasons of what a submitter keeps for a job.
func pinInput(job string) string  { return "input of job " + job }
func pinOutput(job string) string { return "output of job " + job }
func pinImage(job string) string  { return "image of job " + job }
func pinCheckpoint(job string, n int) string {
	return fmt.Sprintf("checkpoint %d of job %s", n, job)
}

// pinImporting holds an input between its import and the job's own pin.
const pinImporting = "input of a submitted job"
