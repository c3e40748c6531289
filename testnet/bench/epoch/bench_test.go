package epoch

import (
	"os"
	"testing"
	"time"
)

// Over links slower than the fixed delay, the adaptive delay loses fewer
// rounds than the node before (arrival cut, 150ms); at 50ms no more. A
// measurement, so it asserts orders, not figures.
func TestAdaptiveDelayLosesFewerRounds(t *testing.T) {
	// Gossip delays here are real ones, so a machine too loaded to run a
	// few peers on time measures its load, not the rule: opt in.
	if os.Getenv("E31_EPOCH_BENCH") == "" || testing.Short() {
		t.Skip("a measurement of about two minutes, for an idle machine; set E31_EPOCH_BENCH=1")
	}
	for _, c := range []struct {
		latency time.Duration
		strict  bool // before must lose rounds here, adaptive fewer
		// agree: gossip is well within half an epoch, so every peer
		// derives the same delay from the same offers.
		agree bool
	}{{300 * time.Millisecond, true, false}, {50 * time.Millisecond, false, true}} {
		got := map[string]Result{}
		for _, m := range []Mode{Before, Adaptive} {
			r, err := Run(t.Context(), Params{Latency: c.latency, Jobs: 150, Mode: m, Seed: 1})
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("%s %-28s jobs %d leased %d lost %d (split %d busy %d stale %d) declined %d delay mean %s max %s, timer lag p99 %s",
				c.latency, m.Name(), r.Jobs, r.Leased, r.Lost, r.LostSplit, r.LostBusy, r.LostStale, r.Declined, r.MeanDelay, r.MaxDelay, r.Lag.P99)
			if r.Leased != r.Jobs {
				t.Errorf("%s, %s: %d of %d jobs leased", c.latency, m.Name(), r.Leased, r.Jobs)
			}
			if c.agree && r.DelaySplits != 0 {
				t.Errorf("%s, %s: peers derived different delays in %d epochs", c.latency, m.Name(), r.DelaySplits)
			}
			got[m.Name()] = r
		}
		before, adaptive := got[Before.Name()], got[Adaptive.Name()]
		if adaptive.Lost > before.Lost || c.strict && adaptive.Lost >= before.Lost {
			t.Errorf("%s: adaptive lost %d rounds, before %d", c.latency, adaptive.Lost, before.Lost)
		}
	}
}

// The summary of runs is their mean, with the extremes.
func TestSummarise(t *testing.T) {
	s := Summarise([]Result{
		{Jobs: 200, Lost: 10, MeanDelay: 100 * time.Millisecond, MaxDelay: 120 * time.Millisecond},
		{Jobs: 100, Lost: 0, MeanDelay: 200 * time.Millisecond, MaxDelay: 300 * time.Millisecond},
	})
	if s.LostPer100 != 2.5 || s.LostPer100Min != 0 || s.LostPer100Max != 5 {
		t.Errorf("lost per 100 jobs %.2f (%.0f–%.0f), want 2.5 (0–5)", s.LostPer100, s.LostPer100Min, s.LostPer100Max)
	}
	if s.MeanDelay != 150*time.Millisecond || s.MaxDelay != 300*time.Millisecond {
		t.Errorf("delay mean %s max %s, want 150ms and 300ms", s.MeanDelay, s.MaxDelay)
	}
}
