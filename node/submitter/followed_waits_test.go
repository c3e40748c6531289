package submitter

import (
	"testing"
	"time"

	"github.com/e31network/e31/market"
)

// A pass on a followed market's view tells the job's wait, the reason or
// the provider it is matched to, and counts as none of this node's epoch
// passes: no assignment is recorded, so no provider is taken for a
// squatter and no claim is granted by it.
func TestNoteFollowedWaits(t *testing.T) {
	h := newHarness(t, Config{}, noOffers{})
	j := h.queuedJob(t, time.Now())
	h.s.NoteFollowedWaits(market.Result{Waiting: []market.Wait{{Job: j.id, Reason: "no offer has 128 GiB of memory"}}})
	if got := h.job(t, j.id).Reason; got != "no offer has 128 GiB of memory" {
		t.Errorf("reason %q after a pass that says why it waits", got)
	}
	prov := "12D3KooWPQkLoBsDPDbGBZQvpnH9VQ8DrsyvBtv3E1Tk2pGZZMzS"
	for range 3 {
		h.s.NoteFollowedWaits(market.Result{Assignments: []market.Assignment{{Job: j.id, Provider: prov}}})
	}
	if got := h.job(t, j.id).Reason; got != matchedWait(prov) {
		t.Errorf("reason %q after a pass that matched it, want %q", got, matchedWait(prov))
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	if len(j.assigned) != 0 || j.passes != 0 {
		t.Errorf("followed passes counted as this node's: %d assignments, %d passes", len(j.assigned), j.passes)
	}
}
