package node

import (
	"errors"
	"strings"
	"testing"

	"github.com/e31network/e31/market"
	"github.com/e31network/e31/node/wire/wiretest"
	"github.com/e31network/e31/p2p"
)

func TestCheckMarket(t *testing.T) {
	one := 0
	for _, tc := range []struct {
		name string
		cfg  Config
		err  string
	}{
		{name: "one market", cfg: Config{}},
		{name: "hash shards", cfg: Config{Shards: 4}},
		{name: "classes", cfg: Config{Market: MarketClasses, ClassShards: map[string]int{"H100x8": 4}}},
		{name: "unknown mode", cfg: Config{Market: "hash"}, err: `market "hash"`},
		{name: "class shards alone", cfg: Config{ClassShards: map[string]int{"cpu": 2}}, err: "--market classes"},
		{name: "shards in classes", cfg: Config{Market: MarketClasses, Shards: 4}, err: "derived from its class"},
		{name: "shard in classes", cfg: Config{Market: MarketClasses, Shard: &one}, err: "derived from its class"},
		{name: "bad class", cfg: Config{Market: MarketClasses, ClassShards: map[string]int{"h100": 2}}, err: "class"},
		{name: "not a power of two", cfg: Config{Market: MarketClasses, ClassShards: map[string]int{"cpu": 3}}, err: "power of two"},
	} {
		err := tc.cfg.checkMarket()
		if (tc.err == "") != (err == nil) || err != nil && !strings.Contains(err.Error(), tc.err) {
			t.Errorf("%s: checkMarket() = %v, want error %q", tc.name, err, tc.err)
		}
	}
	if err := (Config{Market: MarketClasses, Shards: 2}).checkMarket(); !errors.Is(err, errShardInClasses) {
		t.Errorf("shards in class mode: %v, want errShardInClasses", err)
	}
}

func TestClassShard(t *testing.T) {
	id := wiretest.SeededParty(t, 1).ID
	h100 := []market.GPU{{UUID: "a", Model: "H100", MemoryBytes: 80 << 30}}
	rtx := []market.GPU{{UUID: "b", Model: "RTX4090", MemoryBytes: 24 << 30}}
	cfg := Config{Market: MarketClasses, ClassShards: map[string]int{"consumer-24G": 8}}
	if got, want := classShardOf(cfg, id, h100), (p2p.Shard{Class: "H100x1-4", Count: 1}); got != want {
		t.Errorf("one H100: %+v, want %+v", got, want)
	}
	if got, want := classShardOf(cfg, id, nil), (p2p.Shard{Class: "cpu", Count: 1}); got != want {
		t.Errorf("no GPUs: %+v, want %+v", got, want)
	}
	got := classShardOf(cfg, id, rtx)
	if want := p2p.ClassShardOf(id, "consumer-24G", 8); got != want || got.Count != 8 {
		t.Errorf("an RTX4090 in a class split 8 ways: %+v, want %+v", got, want)
	}
}
