package scale

import (
	"math"
	"testing"
)

// The model's figures, checked against the table the model prints for the
// same network (MODEL.md, section 3): unique messages a second, and the
// Match and cut times it reads from its measured fits.
func TestPredictMatchesTheModelsTable(t *testing.T) {
	for _, c := range []struct {
		n, j            float64
		uniq, epochMs   float64
		inMBs, cpuCores float64
	}{
		{n: 1000, j: 10, uniq: 160, epochMs: 3.5, inMBs: 1.9, cpuCores: 0.07},
		{n: 10000, j: 100, uniq: 1600, epochMs: 34, inMBs: 19, cpuCores: 0.66},
		{n: 100000, j: 1, uniq: 10006, epochMs: 417, inMBs: 125, cpuCores: 3.5},
	} {
		p := Predict(c.n, c.j)
		near := func(what string, got, want, tol float64) {
			if math.Abs(got-want) > tol*want {
				t.Errorf("N=%g J=%g: %s %.3g, the model's table says %.3g", c.n, c.j, what, got, want)
			}
		}
		near("unique messages/s", p.UniquePerS, c.uniq, 0.01)
		near("epoch ms", p.CutMs+p.MatchMs, c.epochMs, 0.05)
		near("bytes in MB/s", p.BytesInPerS/1e6, c.inMBs, 0.1)
		near("CPU cores", p.CPUCores, c.cpuCores, 0.1)
	}
}

// Between the measured sizes the Match fit is interpolated, and beyond
// them it grows with N.
func TestMatchAtInterpolates(t *testing.T) {
	a1, _, _ := matchAt(1000)
	a2, _, _ := matchAt(5500)
	a3, _, _ := matchAt(10000)
	if !(a1 < a2 && a2 < a3) {
		t.Errorf("Match's fixed part at 1k, 5.5k, 10k: %g, %g, %g; want it rising", a1, a2, a3)
	}
	if a, _, _ := matchAt(200000); a <= 285 {
		t.Errorf("Match at 200k providers %g ms, no more than at 100k", a)
	}
}
