package verify

import (
	"encoding/json"
	"math"
	"strings"
	"testing"

	"github.com/e31network/e31/testnet/bench/golden"
)

// The model's chance and mean, at values worked by hand.
func TestBinomial(t *testing.T) {
	for _, c := range []struct {
		s    float64
		k    int
		want float64
	}{
		{0.1, 1, 0.1},
		{0.5, 2, 0.75},
		{0.1, 10, 1 - math.Pow(0.9, 10)}, // 0.6513
		{0.05, 0, 0},
		{0, 100, 0},
		{1, 3, 1},
	} {
		if got := PCaught(c.s, c.k); math.Abs(got-c.want) > 1e-12 {
			t.Errorf("PCaught(%g, %d) = %g, want %g", c.s, c.k, got, c.want)
		}
	}
	if got := ExpectedChecks(0.05, 200); math.Abs(got-10) > 1e-12 {
		t.Errorf("ExpectedChecks(0.05, 200) = %g, want 10", got)
	}
}

// Seeded draws repeat draw for draw, and land near the model: with
// 10,000 trials the share's standard error is at most 0.005, and a seed
// fixes the draws, so the bound below is a check of the drawing, not a
// chance.
func TestSimulateFollowsTheModel(t *testing.T) {
	for _, k := range []int{10, 50, 200} {
		for _, s := range []float64{0.02, 0.05, 0.1} {
			d := Simulate(1, s, k, 10_000)
			if again := Simulate(1, s, k, 10_000); again != d {
				t.Fatalf("the same seed drew %+v, then %+v", d, again)
			}
			if p := PCaught(s, k); math.Abs(d.Share()-p) > 0.02 {
				t.Errorf("s=%g k=%d: caught in %.4f of trials, model %.4f", s, k, d.Share(), p)
			}
		}
	}
	if d := Simulate(1, 0, 50, 100); d.Caught != 0 {
		t.Errorf("draws at rate 0 caught the liar %d times", d.Caught)
	}
	if d := Simulate(1, 1, 1, 100); d.Caught != 100 {
		t.Errorf("draws at rate 1 caught the liar %d times of 100", d.Caught)
	}
}

// The report is the cost table with ratios to the unverified array (a
// part not measured says why), the catch table beside the model, and the
// model's draws.
func TestReportText(t *testing.T) {
	r := Report{
		Machine:  "linux/amd64, 2 CPUs, no GPU (simulated), 2026-12-07, load 1.00 1.00 1.00 at the start, 2.00 2.00 2.00 at the end",
		Network:  "3 submitters, 4 honest providers x 4 simulated H100, 1 no-work provider x 2 simulated L4; cost arrays of 1000 tasks, catch arrays of 200",
		TaskRunS: 0.2,
		Cost: []Cost{
			{Verify: "none", Tasks: 1000, Completed: 1000, WallS: 100, GPUHours: 0.2},
			{Verify: "spot 0.05", Tasks: 1000, Completed: 1000, WallS: 110, GPUHours: 0.21, VerificationGPUHours: 0.01, Checks: 50},
			{Verify: "replicas 2", Tasks: 1000, NotMeasured: "replicas on arrays not available"},
		},
		Catch: []Catch{
			{Spot: 0.02, Tasks: 200, LiarTasks: 120, LiarChecks: 2, Checks: 5, Caught: true, Rerun: 120, Completed: 200, WallS: 40},
			{Spot: 0.1, Tasks: 200, LiarTasks: 10, Checks: 20, AsChecker: 1, Completed: 200, WallS: 30},
		},
		Model: []Draws{{Spot: 0.02, K: 10, Trials: 10000, Caught: 1830}, {Spot: 0.1, K: 200, Trials: 10000, Caught: 10000}},
		Seed:  1,
	}
	var b strings.Builder
	if err := r.WriteText(&b); err != nil {
		t.Fatal(err)
	}
	golden.Check(t, "testdata/report.txt", b.String())
}

// The JSON report carries the model beside each draw, for scripts.
func TestDrawsJSON(t *testing.T) {
	b, err := json.Marshal(Simulate(1, 0.5, 2, 10))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), `"model":0.75`) {
		t.Fatalf("draws as JSON: %s, want the model's 0.75 in it", b)
	}
}
