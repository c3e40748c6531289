package node

import (
	"fmt"
	"log/slog"
	"runtime/debug"

	"github.com/e31network/e31/node/metrics"
	"github.com/e31network/e31/node/task"
	"github.com/libp2p/go-libp2p/core/peer"
)

// units runs the node's own units of work on what peers sent (a gossip
// message, a short task) so that a panic in one fails that unit only, and
// the loop goes on with the next, as net/http does with a request;
// node/epoch does the same for an epoch's pass. Immutable after New; the
// group it starts tasks in is the node's loops, which shutdown waits for.
type units struct {
	log     *slog.Logger
	metrics *metrics.Registry
	loops   *task.Group
}

// recoverPanic, deferred, stops a panic in one unit: it is logged at error
// level with its stack and counted under where. It must itself be the
// deferred call: recover stops a panic only there. A safety net for bugs,
// never a way to refuse a message: the tests fail on any "panic recovered"
// in a log.
func (u units) recoverPanic(where string, attrs ...any) {
	v := recover()
	if v == nil {
		return
	}
	attrs = append([]any{"where", where, "panic", fmt.Sprint(v)}, attrs...)
	u.log.Error("panic recovered", append(attrs, "stack", string(debug.Stack()))...)
	u.metrics.Panicked(where)
}

// goTask runs fn as one of the node's short tasks, named task, about peer
// p: in the loops' group, a panic recovered as metrics.PanicTask so that
// it fails this task only.
func (u units) goTask(task string, p peer.ID, fn func()) {
	u.loops.Go(func() {
		defer u.recoverPanic(metrics.PanicTask, "task", task, "peer", p)
		fn()
	})
}
