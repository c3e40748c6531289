package submitter

import (
	"context"
	"sync"
	"time"

	"github.com/e31network/e31/node/task"
	"github.com/e31network/e31/node/wire"
)

// taskAnnouncer gathers the leases this node countersigned for its arrays'
// tasks and their releases, for taskBatchLoop to announce together
// (wire.KindTaskBatch) on the jobs topic of each array's market: an
// array's tasks cost the jobs topic a message a batch, not two each. A
// provider announces neither for a task.
type taskAnnouncer struct {
	mu      sync.Mutex
	pending map[marketKey]*taskBatch // guarded by mu
}

// taskBatch is what the announcer holds for one market.
type taskBatch struct {
	leases   []wire.SignedLease
	releases []wire.ReleaseBody
}

// DefaultTaskBatchEvery is TaskBatchEvery when unset: at an array's
// pace of a few tasks a second, a message carries several.
const DefaultTaskBatchEvery = time.Second

// of is m's batch; a.mu is held.
func (a *taskAnnouncer) of(m marketKey) *taskBatch {
	if a.pending == nil {
		a.pending = make(map[marketKey]*taskBatch)
	}
	b := a.pending[m]
	if b == nil {
		b = &taskBatch{}
		a.pending[m] = b
	}
	return b
}

func (a *taskAnnouncer) lease(m marketKey, l wire.SignedLease) {
	a.mu.Lock()
	defer a.mu.Unlock()
	b := a.of(m)
	b.leases = append(b.leases, l)
}

func (a *taskAnnouncer) release(m marketKey, r wire.ReleaseBody) {
	a.mu.Lock()
	defer a.mu.Unlock()
	b := a.of(m)
	b.releases = append(b.releases, r)
}

// take empties the announcer, returning what it held, by market.
func (a *taskAnnouncer) take() map[marketKey]*taskBatch {
	a.mu.Lock()
	defer a.mu.Unlock()
	p := a.pending
	a.pending = nil
	return p
}

// taskBatchLoop announces the tasks' leases and releases gathered, every
// TaskBatchEvery.
func (s *Submitter) taskBatchLoop(ctx context.Context) {
	task.Every(ctx, s.cfg.TaskBatchEvery, func(time.Time) {
		for m, pending := range s.batch.take() {
			s.parts.announceTasks(ctx, m, pending)
		}
	})
}

// announceTasks announces the tasks' leases and releases of one market.
func (s *parts) announceTasks(ctx context.Context, m marketKey, pending *taskBatch) {
	for _, b := range wire.TaskBatches(pending.leases, pending.releases) {
		if err := s.publishJob(ctx, m.market(), wire.KindTaskBatch, b); err != nil && ctx.Err() == nil {
			// The views heal: a lease unannounced is one its provider's
			// offers end, a release unannounced one they show free
			// (view.LeaseOfferMargin).
			s.log.Warn("announce tasks' leases and releases", "market", m.String(), "leases", len(b.Leases), "releases", len(b.Releases), "err", err)
		}
	}
}
