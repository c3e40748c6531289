package submitter

import (
	"testing"
	"time"

	"github.com/e31network/e31/market"
	"github.com/e31network/e31/node/api"
	"github.com/e31network/e31/node/wire"
)

// A resumption asks for what its attempt left: the limit less the run up
// to its own checkpoint, at least two intervals and minResumeLimit, never
// more than the limit.
func TestLeftToRun(t *testing.T) {
	for _, c := range []struct {
		limit, ran, every, want market.Duration
	}{
		{8 * market.Hour, 5 * market.Hour, 20 * market.Minute, 3 * market.Hour},
		{8 * market.Hour, 0, 20 * market.Minute, 8 * market.Hour},
		{8 * market.Hour, 7*market.Hour + 50*market.Minute, 20 * market.Minute, 40 * market.Minute},
		{8 * market.Hour, 9 * market.Hour, market.Minute, minResumeLimit},
		{5 * market.Minute, 4 * market.Minute, market.Minute, 5 * market.Minute},
		{market.Hour, -market.Hour, market.Minute, market.Hour},
	} {
		if got := leftToRun(c.limit, c.ran, c.every); got != c.want {
			t.Errorf("leftToRun(%s, %s, %s) = %s, want %s", c.limit, c.ran, c.every, got, c.want)
		}
	}
}

// Only a checkpoint the attempt took itself counts as its progress.
func TestRanToCheckpoint(t *testing.T) {
	run := time.Date(2026, 1, 1, 23, 30, 0, 0, time.UTC)
	r := &Record{Lease: &wire.SignedLease{Terms: wire.LeaseTerms{ID: "lease1"}}}
	r.step(api.StepRun, run)
	r.CheckpointLease, r.CheckpointAt = "lease1", run.Add(7*time.Hour+40*time.Minute)
	if got := r.ranToCheckpoint(); got != 7*market.Hour+40*market.Minute {
		t.Fatalf("ran to its own checkpoint: %s, want 7h40m", got)
	}
	r.CheckpointLease = "earlier"
	if got := r.ranToCheckpoint(); got != 0 {
		t.Fatalf("ran to an earlier attempt's checkpoint: %s, want 0", got)
	}
}
