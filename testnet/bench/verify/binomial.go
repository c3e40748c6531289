package verify

import (
	"math"
	"math/rand/v2"
)

// PCaught is the chance that a liar whose k tasks are each drawn for a
// check with chance s has at least one drawn: 1-(1-s)^k.
func PCaught(s float64, k int) float64 {
	if k <= 0 || s <= 0 {
		return 0
	}
	if s >= 1 {
		return 1
	}
	return -math.Expm1(float64(k) * math.Log1p(-s))
}

// ExpectedChecks is the mean number of checks drawn on k tasks at rate s.
func ExpectedChecks(s float64, k int) float64 { return s * float64(max(k, 0)) }

// Draws is the model run as draws: in each of trials trials, each of k
// tasks is drawn with chance s, and a trial with a task drawn caught the
// liar.
type Draws struct {
	Spot   float64 `json:"spot"`
	K      int     `json:"k"`
	Trials int     `json:"trials"`
	Caught int     `json:"caught"`
	// Model is the model's chance, PCaught(Spot, K).
	Model float64 `json:"model"`
}

// Share is the share of trials that caught the liar.
func (d Draws) Share() float64 {
	if d.Trials == 0 {
		return 0
	}
	return float64(d.Caught) / float64(d.Trials)
}

// Simulate draws trials trials of k tasks at rate s from a math/rand
// seeded with seed, so that a run can be repeated draw for draw; each
// rate and k draws from a stream of its own, so that the rows of a report
// do not share their luck.
func Simulate(seed uint64, s float64, k, trials int) Draws {
	r := rand.New(rand.NewPCG(seed, math.Float64bits(s)^uint64(k)))
	d := Draws{Spot: s, K: k, Trials: trials, Model: PCaught(s, k)}
	for range trials {
		for range k {
			if r.Float64() < s {
				d.Caught++
				break
			}
		}
	}
	return d
}
