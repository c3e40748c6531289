package submitter

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/e31network/e31/node/wire"
	"github.com/e31network/e31/node/wire/wiretest"
	"github.com/e31network/e31/p2p"
	"github.com/libp2p/go-libp2p/core/peer"
)

// An output offered over a relay-only path is not fetched through the
// relay: the job's status says it waits for a direct connection, then why
// it gave up, and the provider is told; it never stalls in silence.
func TestOutputWaitsForADirectPath(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, Config{}, noOffers{})
		r := h.leasedJob(t, time.Now())
		h.s.d.Path = func(peer.ID) (p2p.Path, string) { return p2p.PathRelayed, "hole punch failed: all retries failed" }
		raw, err := json.Marshal(wire.OutputRequest{Lease: r.Lease.Terms.ID, Job: r.ID, Output: wiretest.CID(t, "output")})
		if err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() {
			_, err := h.s.HandleOutput(context.Background(), h.prov.ID, raw)
			done <- err
		}()
		time.Sleep(time.Second)
		synctest.Wait()
		if got := h.job(t, r.ID).Reason; !strings.Contains(got, "waiting for a path to the provider that carries data") {
			t.Fatalf("while waiting, status reason %q, want it to say it waits for a direct connection", got)
		}
		err = <-done
		if err == nil || !strings.Contains(err.Error(), "only a relayed one") {
			t.Fatalf("HandleOutput = %v, want an error naming the relayed path", err)
		}
		if got := h.job(t, r.ID).Reason; !strings.Contains(got, "hole punch failed") || !strings.Contains(got, "after 30s") {
			t.Fatalf("status reason %q, want why the output could not be returned", got)
		}
	})
}
