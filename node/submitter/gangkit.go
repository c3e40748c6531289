package submitter

import (
	"context"

	"github.com/e31network/e31/content"
	"github.com/e31network/e31/market"
	"github.com/e31network/e31/node/api"
)

// What the gangs (gangs.go) reach through the kit, which is their
// gangHost, and the handle of a gang's record: a gang is an array whose
// tasks are its parts, and goes on as a new attempt submitted whole.

// gangHandle is the handle of a gang's record, over the gangs.
type gangHandle struct {
	k     *kit
	g     *jobTracker
	whole bool // the gang under the ID it was submitted with
}

func (h gangHandle) view(seen uint64, done bool) (api.Job, <-chan struct{}) {
	if h.whole {
		return h.k.gangs.chainView(h.g, seen, done)
	}
	return (arrayRun{h.k, h.g}).view(seen, done)
}

func (h gangHandle) withdraw(ctx context.Context) (api.Job, error) {
	return h.k.gangs.withdraw(ctx, h.g, h.whole)
}

func (h gangHandle) resume(ctx context.Context, fromStart bool) (api.Job, error) {
	return h.k.gangs.resume(ctx, h.k.lastAttempt(h.g), fromStart)
}

func (h gangHandle) output(ctx context.Context) (string, error) {
	return arrayRun{h.k, h.k.lastAttempt(h.g)}.outputAs(ctx, h)
}

// submit is the intake's, for the gangs, which submit a gang's next
// attempt.
func (k *kit) submit(ctx context.Context, decl market.Declaration, parent *Record, progress content.Progress, secrets map[string][]byte) (api.Job, error) {
	return k.in.submit(ctx, decl, parent, progress, secrets)
}

// arrayView and withdrawArray are an array's view and withdrawal, for the
// gangs, which act on a gang as on the array it is.
func (k *kit) arrayView(p *jobTracker, seen uint64, done bool) (api.Job, <-chan struct{}) {
	return arrayRun{k, p}.view(seen, done)
}
func (k *kit) withdrawArray(ctx context.Context, p *jobTracker) (api.Job, error) {
	return arrayRun{k, p}.withdraw(ctx)
}
