package bench

// Default gives the option *v its default d where it was left out: zero,
// or below zero, which no option of a benchmark means.
func Default[T ~int | ~int64 | ~uint64 | ~float64](v *T, d T) {
	if *v <= 0 {
		*v = d
	}
}
