package submitter

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/e31network/e31/node/wire/wiretest"
	"github.com/ipfs/go-cid"
)

// stopDuringPin is a store in which this node's stop comes while a
// resumption pins its content: the first Pin ends the submitter's context,
// as Shutdown does, and fails as a pin cut short does.
type stopDuringPin struct {
	noStore
	stop func()
}

func (s stopDuringPin) Pin(ctx context.Context, _ cid.Cid, _ string) error {
	s.stop()
	<-ctx.Done()
	return ctx.Err()
}

// A resumption that this node's own stop cuts short (a pin ended by the
// stop's cancelled context) is no ending of the job: the job stays due,
// with nothing recorded against it, and the next start submits it.
func TestResumptionCutByTheStopIsMadeAtTheNextStart(t *testing.T) {
	cfg := Config{ProviderLostAfter: time.Hour, RequeueEvery: time.Hour}
	h := newHarness(t, cfg, noOffers{})
	cp := wiretest.CID(t, "checkpoint")
	h.lostAuto(t, "lostjob", cp)
	ctx, stop := context.WithCancel(context.Background())
	h.s.d.Store = stopDuringPin{stop: stop}
	h.s.autoResume(ctx, "lostjob")

	j := h.job(t, "lostjob")
	if j.State.Terminal() || strings.Contains(j.Reason, "not resumed") || len(j.Attempts) != 1 {
		t.Fatalf("after a resumption cut by the stop: %s, %d attempts, %q", j.State, len(j.Attempts), j.Reason)
	}

	// The next start, on the same records.
	deps := h.s.d
	deps.Store = noStore{}
	again := New(cfg, deps)
	if err := again.Recover(); err != nil {
		t.Fatal(err)
	}
	again.resumeDueAtStart(context.Background())
	j, err := again.Job("lostjob")
	if err != nil {
		t.Fatal(err)
	}
	if len(j.Attempts) != 2 || j.Attempts[1].StartedFrom != cp || j.State.Terminal() {
		t.Fatalf("after the next start: %s, attempts %+v, %q", j.State, j.Attempts, j.Reason)
	}
}
