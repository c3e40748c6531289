package joblog

import (
	"bytes"
	"math/rand/v2"
	"testing"
)

// lastIndex reads a long log in blocks; it finds what bytes.LastIndex on
// the whole log finds, wherever the pattern falls against the blocks.
func TestLastIndexAcrossBlocks(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	log := make([]byte, 3*scanBlock+123)
	for i := range log {
		log[i] = byte('a' + rng.IntN(26))
	}
	pat := []byte("0123456789abcdef0123456789ABCDEF")
	cases := []int{0, scanBlock - 5, scanBlock - len(pat) + 1, 2*scanBlock + 7, len(log) - len(pat)}
	for range 50 {
		cases = append(cases, rng.IntN(len(log)-len(pat)))
	}
	for _, at := range cases {
		l := bytes.Clone(log)
		copy(l[at:], pat)
		for _, end := range []int{len(l), at + len(pat), at + len(pat) - 1} {
			want := bytes.LastIndex(l[:end], pat)
			got, ok, err := lastIndex(bytes.NewReader(l), int64(end), pat)
			if err != nil {
				t.Fatal(err)
			}
			if ok != (want >= 0) || (ok && got != int64(want+len(pat))) {
				t.Fatalf("pattern at %d, end %d: got %d %v, want end %d", at, end, got, ok, want+len(pat))
			}
		}
	}
}
