package offer

import (
	"fmt"
	"testing"

	"github.com/e31network/e31/market"
)

func TestOnlyTaken(t *testing.T) {
	gpus := func(free ...bool) []market.GPU {
		var out []market.GPU
		for i, f := range free {
			out = append(out, market.GPU{Index: i, UUID: fmt.Sprint("GPU-", i), Model: "H100", Free: f})
		}
		return out
	}
	offer := func(free ...bool) market.Offer {
		return market.Offer{Provider: "p", CPUs: 8, MemoryBytes: 1 << 30, GPUs: gpus(free...)}
	}
	other := offer(true, true)
	other.CPUs = 4
	// A lease taking GPUs and disk: the disk the node can grant changes,
	// which no lease's announcement says.
	lessDisk := offer(false, true)
	lessDisk.MaxJobDisk = 8 << 30
	full := offer(true, true)
	full.NoDisk = market.DiskFull
	tests := []struct {
		name           string
		published, now market.Offer
		want           bool
	}{
		{"unchanged", offer(true, true), offer(true, true), true},
		{"a GPU taken", offer(true, true), offer(false, true), true},
		{"every GPU taken", offer(true, true), offer(false, false), true},
		{"a GPU shown held is free", offer(false, true), offer(true, true), false},
		{"one taken, one freed", offer(false, true), offer(true, false), false},
		{"another field changed", offer(true, true), other, false},
		{"a GPU gone", offer(true, true), offer(true), false},
		{"a GPU and disk taken", offer(true, true), lessDisk, false},
		{"the disk full", offer(true, true), full, false},
	}
	for _, tc := range tests {
		if got := onlyTaken(tc.published, tc.now); got != tc.want {
			t.Errorf("%s: onlyTaken = %v, want %v", tc.name, got, tc.want)
		}
	}
}
