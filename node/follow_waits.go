package node

import (
	"context"
	"time"

	"github.com/e31network/e31/node/task"
)

// tellWaits makes a pass of Match on each followed market's view every
// epoch until ctx ends, and tells the submitter what it says of this
// node's jobs there: why each waits, or which provider it is matched to.
// The node makes no epoch passes in a market it only follows, so without
// these its jobs there would show no reason to wait. The pass is the
// market's Judge's, which answers the claims check's questions after it.
func (f *follows) tellWaits(ctx context.Context) {
	task.Every(ctx, max(f.cfg.Epoch, time.Second), func(now time.Time) {
		f.tuneOffers(f.open(), now)
		for _, m := range f.followed() {
			if !m.heard.on() {
				continue // no job of this node waits there
			}
			if res, ok := m.judge.Pass(now); ok && f.waits != nil {
				f.waits(res)
			}
		}
	})
}
