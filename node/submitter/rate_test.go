package submitter

import (
	"testing"
	"time"

	"github.com/e31network/e31/node/api"
	"github.com/e31network/e31/node/wire/wiretest"
	"github.com/e31network/e31/p2p"
	"github.com/libp2p/go-libp2p/core/peer"
)

// The rate served a peer is its bytes over the last few seconds, and
// falls to nothing once the transfer stops.
func TestServedRate(t *testing.T) {
	a, b := wiretest.FreshParty(t).ID, wiretest.FreshParty(t).ID
	var s servedRate
	t0 := time.Unix(1_000_000, 0)
	for i := range 8 {
		s.add(a, 1<<20, t0.Add(time.Duration(i)*500*time.Millisecond)) // 2 MiB a second
	}
	if got := s.rate(a, t0.Add(3500*time.Millisecond)); got != 2<<20 {
		t.Fatalf("rate %v B/s, want %v", got, 2<<20)
	}
	if got := s.rate(b, t0); got != 0 {
		t.Fatalf("a peer served nothing: %v B/s", got)
	}
	if got := s.rate(a, t0.Add(time.Minute)); got != 0 {
		t.Fatalf("a minute after the transfer: %v B/s, want 0", got)
	}
}

// A job whose provider stages its inputs from here shows how fast they
// move, beside the path they take.
func TestStagingRateInStatus(t *testing.T) {
	h := newHarness(t, Config{ProviderLostAfter: time.Hour, RequeueEvery: time.Hour}, noOffers{})
	h.s.d.Path = func(peer.ID) (p2p.Path, string) { return p2p.PathDirect, "" }
	r := h.leasedJob(t, time.Now())
	if err := h.s.jobs.get(r.ID).update(func(x *Record) error {
		x.State = api.JobRenting
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	for range 4 {
		h.s.Served(h.prov.ID, 1<<20)
	}
	j := h.job(t, r.ID)
	if j.Path != "direct" || j.StagingRate <= 0 {
		t.Fatalf("a job staging from here: path %q, rate %v B/s; want direct with a rate", j.Path, j.StagingRate)
	}
}
