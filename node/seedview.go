package node

import (
	"time"

	"github.com/e31network/e31/node/view"
	"github.com/e31network/e31/node/wire"
)

// taskNotQueued tells the view of the network's queue, as the submitter's
// Recover finds them, of this node's tasks that a previous run leased or
// saw end (submitter.Deps.TaskNotQueued): the view starts empty, and the
// array's next announcement would otherwise open every task of it. A
// leased task's lease is added, which closes the task and holds its
// GPUs, as the announcement of the lease did on every peer; an ended one
// is closed, as its submitter's word, at when it ended.
func (n *Node) taskNotQueued(task string, lease *wire.SignedLease, at time.Time) {
	stamp := view.Stamp{Signed: at, Arrived: time.Now()}
	if lease != nil {
		n.market.AddLease(*lease, stamp)
		return
	}
	n.market.CloseJob(task, n.self, stamp)
}
