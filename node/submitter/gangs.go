package submitter

import (
	"context"
	"sync"

	"github.com/e31network/e31/content"
	"github.com/e31network/e31/market"
	"github.com/e31network/e31/node/api"
	"github.com/e31network/e31/node/task"
)

// gangHost is what the gangs need of the rest of the submitter, the
// Submitter: the views of a job and of an array, the chain of a job's
// attempts, the submission of a gang's next attempt and the withdrawal of
// an array's tasks. The gangs call into the rest through these alone.
type gangHost interface {
	// view is a job as the API shows it (Submitter.view).
	view(id string, seen uint64, done bool) (api.Job, <-chan struct{}, error)
	// arrayView is an array's view, its tasks counted.
	arrayView(p *jobTracker, seen uint64, done bool) (api.Job, <-chan struct{})
	// attempts are the trackers of a job's attempts, first to last.
	attempts(first *jobTracker) []*jobTracker
	// lastAttempt is the tracker of the last attempt of j's job.
	lastAttempt(j *jobTracker) *jobTracker
	// submit submits a declaration, as the attempt after parent's.
	submit(ctx context.Context, d market.Declaration, parent *Record, progress content.Progress, secrets map[string][]byte) (api.Job, error)
	// withdrawArray withdraws every task of an array not ended.
	withdrawArray(ctx context.Context, p *jobTracker) (api.Job, error)
}

// gangs holds the run of each gang attempt of this node's that is not over
// (gangrun.go), and acts on a gang as a whole where no run is needed: its
// view, its resumption and its withdrawal. A run is made when its gang is
// first asked for (of): when it is announced, when a part is leased, or
// when the loops start for the gangs a previous run left.
type gangs struct {
	// Immutable after newGangs.
	*parts
	host gangHost
	jobs *registry
	// ctx ends when the Submitter's Shutdown starts; each run's context is
	// derived from it.
	ctx context.Context
	// tasks is the Submitter's group: each run's loop is one of its
	// goroutines, so that Shutdown waits for the loops, and each loop for
	// the calls of its run.
	tasks *task.Group
	// resuming is the Submitter's ordering lock of resumptions, held
	// across a resumption's submit so that an attempt is continued by one
	// attempt at most. Never taken under a state lock.
	resuming *sync.Mutex

	// mu guards runs and started. A state lock: held over the map alone,
	// never while a run is checked or stopped.
	mu   sync.Mutex
	runs map[string]*gangRun
	// started is set by start: from then on a run starts its loop as it
	// is made.
	started bool
}

func newGangs(ctx context.Context, p *parts, host gangHost, jobs *registry, tasks *task.Group, resuming *sync.Mutex) *gangs {
	return &gangs{parts: p, host: host, jobs: jobs, ctx: ctx, tasks: tasks, resuming: resuming, runs: map[string]*gangRun{}}
}

// start starts the loop of every gang's run, making one for each gang in
// memory that is not over, and of every run made from here on.
func (g *gangs) start() {
	g.mu.Lock()
	g.started = true
	waiting := make([]*gangRun, 0, len(g.runs))
	for _, r := range g.runs {
		waiting = append(waiting, r)
	}
	g.mu.Unlock()
	for _, r := range waiting {
		g.tasks.Go(r.loop)
	}
	for id, j := range g.jobs.live() {
		if j.isGangTracker() {
			g.of(id)
		}
	}
}

// of returns the run of gang id, making it, and once start has run
// starting its loop, if the gang is live (a gang's record, not held for
// its upstreams, not over) and has none yet; nil if id is no live gang's.
func (g *gangs) of(id string) *gangRun {
	g.mu.Lock()
	r := g.runs[id]
	g.mu.Unlock()
	if r != nil {
		return r
	}
	j := g.jobs.get(id)
	if j == nil {
		return nil
	}
	var live bool
	var n int
	j.view(func(rec *Record) { live, n = rec.isGang() && !rec.placeholder() && !rec.GangOver, rec.Tasks })
	if !live {
		return nil
	}
	g.mu.Lock()
	if r := g.runs[id]; r != nil {
		g.mu.Unlock()
		return r
	}
	r = newGangRun(g, id, n)
	g.runs[id] = r
	start := g.started
	g.mu.Unlock()
	if start {
		g.tasks.Go(r.loop)
	}
	return r
}

// left takes a run whose loop has ended out of the registry.
func (g *gangs) left(r *gangRun) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.runs[r.id] == r {
		delete(g.runs, r.id)
	}
}

// members are the trackers of a gang's parts, by rank; nil where one is
// missing.
func (g *gangs) members(gang string, n int) []*jobTracker {
	out := make([]*jobTracker, n)
	for r := range n {
		out[r] = g.jobs.get(market.TaskID(gang, r))
	}
	return out
}
