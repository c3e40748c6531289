package bench

import "slices"

// Spread summarises a sample; percentiles are nearest-rank, so with fewer
// than 100 values p99 is the maximum.
type Spread struct {
	N   int     `json:"n"`
	Min float64 `json:"min"`
	P50 float64 `json:"p50"`
	P99 float64 `json:"p99"`
	Max float64 `json:"max"`
}

// SpreadOf summarises v.
func SpreadOf(v []float64) Spread {
	if len(v) == 0 {
		return Spread{}
	}
	s := slices.Clone(v)
	slices.Sort(s)
	rank := func(p float64) float64 {
		i := int(float64(len(s))*p+0.999999) - 1
		return s[min(max(i, 0), len(s)-1)]
	}
	return Spread{N: len(s), Min: s[0], P50: rank(0.50), P99: rank(0.99), Max: s[len(s)-1]}
}
