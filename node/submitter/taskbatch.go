package submitter

import (
	"context"
	"sync"
	"time"

	"github.com/e31network/e31/node/task"
	"github.com/e31network/e31/node/wire"
	"github.com/e31network/e31/p2p"
)

// taskAnnouncer gathers the leases this node countersigned for its arrays'
// tasks and their releases, for taskBatchLoop to announce together
// (wire.KindTaskBatch): an array's tasks cost the jobs topic a message a
// batch, not two each. A provider announces neither for a task.
type taskAnnouncer struct {
	mu       sync.Mutex
	leases   []wire.SignedLease
	releases []wire.ReleaseBody
}

// DefaultTaskBatchEvery is TaskBatchEvery when unset: at an array's
// pace of a few tasks a second, a message carries several.
const DefaultTaskBatchEvery = time.Second

func (a *taskAnnouncer) lease(l wire.SignedLease) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.leases = append(a.leases, l)
}

func (a *taskAnnouncer) release(r wire.ReleaseBody) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.releases = append(a.releases, r)
}

// take empties the announcer, returning what it held.
func (a *taskAnnouncer) take() ([]wire.SignedLease, []wire.ReleaseBody) {
	a.mu.Lock()
	defer a.mu.Unlock()
	l, r := a.leases, a.releases
	a.leases, a.releases = nil, nil
	return l, r
}

// taskBatchLoop announces the tasks' leases and releases gathered, every
// TaskBatchEvery.
func (s *Submitter) taskBatchLoop(ctx context.Context) {
	task.Every(ctx, s.cfg.TaskBatchEvery, func(time.Time) {
		leases, releases := s.batch.take()
		for _, b := range wire.TaskBatches(leases, releases) {
			if _, err := s.d.Gossip.Publish(ctx, p2p.TopicJobs, wire.KindTaskBatch, b); err != nil && ctx.Err() == nil {
				// The views heal: a lease unannounced is one its
				// provider's offers end, a release unannounced one they
				// show free (view.LeaseOfferMargin).
				s.log.Warn("announce tasks' leases and releases", "leases", len(b.Leases), "releases", len(b.Releases), "err", err)
			}
		}
	})
}
