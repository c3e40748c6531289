package submitter

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/e31network/e31/node/task"
)

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
	// parallel keeps the arrays' parallel caps (array_parallel.go).
	parallel *parallelGate
}

// Submitter follows the jobs this node submitted through their five steps.
// Each attempt of a job has its jobTracker (tracker.go), which holds its
// record and handles what its provider sends; each job has a handle of its
// kind (handle.go: a chain of attempts, an array, a held job, a gang),
// made by the kit from the registry, which answers what the user asks of
// the job. The Submitter keeps the kit and the intake, the loops over all
// jobs (the provider watch, the requeue, the eviction, the hold loop),
// Submit, Withdraw, Recover and the queries, and routes each provider's
// stream to the job's tracker (handlers.go).
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
	s.in = &intake{kit: s.kit}
	s.kit.in = s.in
	s.reload = s.jobs.get
	s.parallel = &parallelGate{leased: s.jobs.leasedTasks}
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
	s.kit.verify = newVerifier(s.kit)
	s.kit.verify.drawArray = spotDraw{s.kit.verify}.array
	s.in.replicas = s.kit.verify.submitted
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
	s.tasks.Go(func() { s.stopLoop(s.ctx) })
	s.tasks.Go(func() { s.secretsLoop(s.ctx) })
	s.tasks.Go(func() { s.verify.loop(s.ctx) })
	s.tasks.Go(func() { mover{s.kit}.loop(s.ctx) })
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
