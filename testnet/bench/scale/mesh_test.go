package scale

import (
	"context"
	"testing"
	"time"
)

// A small mesh of real hosts delivers every message to every host, and
// each host receives at least one copy of each and no more than it has
// peers.
func TestMeasureMesh(t *testing.T) {
	if testing.Short() {
		t.Skip("starts 12 libp2p hosts")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	r, err := MeasureMesh(ctx, t.Logf, MeshOptions{Hosts: 12, Dial: 4, Rate: 20, Window: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if r.Published < 20 {
		t.Fatalf("%d messages published in 2s at 20/s", r.Published)
	}
	if r.Reached < 0.99 {
		t.Errorf("%.1f%% of (message, host) pairs delivered, want all", 100*r.Reached)
	}
	if r.CopiesIn < 0.9 || r.CopiesIn > 11 {
		t.Errorf("%.2f copies received per delivery, want between one and the hosts' peers", r.CopiesIn)
	}
	if r.AllP99Ms <= 0 {
		t.Errorf("no delay to the last host measured: %+v", r)
	}
}
