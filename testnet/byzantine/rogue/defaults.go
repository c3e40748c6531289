package rogue

// orDefault gives the option *v its default d where it was left out: zero,
// or below zero, which no option of an attack means.
func orDefault[T ~int | ~int64 | ~uint64 | ~float64](v *T, d T) {
	if *v <= 0 {
		*v = d
	}
}
