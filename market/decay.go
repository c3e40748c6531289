package market

import "math/bits"

// Charge is the GPU time a lease is charged when announced: its GPUs times
// its declared limit, in GPU-milliseconds. The release refunds the unused
// part. Charging the limit up front means a submitter cannot start many long
// jobs in one epoch before their use shows.
func Charge(gpus int, limit Duration) int64 {
	if gpus <= 0 || limit <= 0 {
		return 0
	}
	hi, lo := bits.Mul64(uint64(gpus), uint64(limit))
	if hi != 0 || lo > 1<<63-1 {
		return 1<<63 - 1
	}
	return int64(lo)
}

// Decay returns prevMillis after elapsedMs of exponential decay with the
// given half-life: prev × 2^(−elapsed/halfLife). It uses integers only, so
// that every peer computes the same shares to the last unit; the error is
// below one part in a billion plus truncation. A non-positive half-life
// forgets everything; a non-positive elapsed time changes nothing.
func Decay(prevMillis int64, elapsedMs int64, halfLifeMs int64) int64 {
	if prevMillis <= 0 {
		return max(prevMillis, 0)
	}
	if elapsedMs <= 0 {
		return prevMillis
	}
	if halfLifeMs <= 0 {
		return 0
	}
	halvings := elapsedMs / halfLifeMs
	if halvings >= 63 {
		return 0
	}
	v := uint64(prevMillis) >> halvings
	rem := uint64(elapsedMs % halfLifeMs)
	// x = rem/halfLife as a 32-bit binary fraction.
	x, _ := bits.Div64(rem>>32, rem<<32, uint64(halfLifeMs))
	// 2^(−x) = Π 2^(−2^(−i)) over the bits i of x that are set.
	f := uint64(1) << 62
	for i := 1; i <= 32; i++ {
		if x&(1<<(32-i)) != 0 {
			hi, lo := bits.Mul64(f, exp2NegPow2(i))
			f = hi<<2 | lo>>62
		}
	}
	hi, lo := bits.Mul64(v, f)
	return int64(hi<<2 | lo>>62)
}

// exp2NegPow2 returns 2^(−2^(−i)) in 2.62 fixed point, for i in 1..32:
// √½, ⁴√½, and so on. decay_test.go recomputes the table with integer
// square roots.
func exp2NegPow2(i int) uint64 {
	switch i {
	case 1:
		return 0x2d413cccfe779921
	case 2:
		return 0x35d13f32b5a75abd
	case 3:
		return 0x3ab031b9f7490e4b
	case 4:
		return 0x3d495f454921b30a
	case 5:
		return 0x3ea0ecb6dc8a80ce
	case 6:
		return 0x3f4f83033d21b05c
	case 7:
		return 0x3fa784571ee3e212
	case 8:
		return 0x3fd3b2d65447b228
	case 9:
		return 0x3fe9d59487236bb3
	case 10:
		return 0x3ff4e9d4703df842
	case 11:
		return 0x3ffa74acbdf6c9d4
	case 12:
		return 0x3ffd3a46ffc6e30e
	case 13:
		return 0x3ffe9d1fa8010198
	case 14:
		return 0x3fff4e8ede053ad4
	case 15:
		return 0x3fffa747318376ab
	case 16:
		return 0x3fffd3a38961e6fd
	case 17:
		return 0x3fffe9d1c0d8fd13
	case 18:
		return 0x3ffff4e8df7680c4
	case 19:
		return 0x3ffffa746f7dc0eb
	case 20:
		return 0x3ffffd3a37af8097
	case 21:
		return 0x3ffffe9d1bd3e853
	case 22:
		return 0x3fffff4e8de8fe2b
	case 23:
		return 0x3fffffa746f44196
	case 24:
		return 0x3fffffd3a37a116b
	case 25:
		return 0x3fffffe9d1bd04dd
	case 26:
		return 0x3ffffff4e8de8178
	case 27:
		return 0x3ffffffa746f407e
	case 28:
		return 0x3ffffffd3a37a02f
	case 29:
		return 0x3ffffffe9d1bd013
	case 30:
		return 0x3fffffff4e8de808
	case 31:
		return 0x3fffffffa746f403
	case 32:
		return 0x3fffffffd3a37a01
	}
	return 1 << 62
}
