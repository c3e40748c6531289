package main

import (
	"testing"

	"github.com/e31network/e31/node/api"
)

func TestFreeBoxes(t *testing.T) {
	for _, c := range []struct {
		shard api.MarketShard
		want  string
	}{
		{api.MarketShard{FreeBoxes: []int{3}}, "0 with ≥1 free"},
		{api.MarketShard{FreeBoxes: []int{3, 9, 0, 3}}, "12 with ≥1 free, 3 with 3"},
		{api.MarketShard{Class: "H100x8", FreeBoxes: []int{1, 4, 0, 0, 0, 0, 0, 0, 3}}, "7 with ≥1 free, 3 whole"},
		{api.MarketShard{Class: "cpu", FreeBoxes: []int{2, 1}}, "1 with ≥1 free, 1 with 1"},
	} {
		if got := freeBoxes(c.shard); got != c.want {
			t.Errorf("freeBoxes(%s %v) = %q, want %q", c.shard.Class, c.shard.FreeBoxes, got, c.want)
		}
	}
}
