package main

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/e31network/e31/market"
	"github.com/e31network/e31/node"
	"github.com/e31network/e31/p2p"
)

// marketFlags checks --market and --class-shards, with --shards and
// --shard as given (shardsSet: either was given): in class mode a
// provider's shard is derived from its class, so neither applies.
func marketFlags(mode, classShards string, shardsSet bool) (map[string]int, error) {
	switch mode {
	case "":
		if classShards != "" {
			return nil, fmt.Errorf("--class-shards %q: needs --market %s", classShards, node.MarketClasses)
		}
		return nil, nil
	case node.MarketClasses:
	default:
		return nil, fmt.Errorf("--market %q: want %s, or nothing for one market (or --shards)", mode, node.MarketClasses)
	}
	if shardsSet {
		return nil, fmt.Errorf("--market %s: --shards and --shard do not apply: a provider's shard is derived from its class", node.MarketClasses)
	}
	return parseClassShards(classShards)
}

// parseClassShards reads "CLASS=N,...": how many subshards each named
// class's market is split into.
func parseClassShards(v string) (map[string]int, error) {
	if v == "" {
		return nil, nil
	}
	out := map[string]int{}
	for item := range strings.SplitSeq(v, ",") {
		class, count, ok := strings.Cut(strings.TrimSpace(item), "=")
		if !ok {
			return nil, fmt.Errorf("--class-shards %q: want CLASS=N,..., e.g. H100x8=4,consumer-24G=16", v)
		}
		if _, err := market.ParseClass(class); err != nil {
			return nil, fmt.Errorf("--class-shards: %w", err)
		}
		n, err := strconv.Atoi(count)
		if err == nil && (n < 1 || (p2p.Shard{Count: n}).Valid() != nil) {
			err = fmt.Errorf("not a power of two from 1 to %d", p2p.MaxShards)
		}
		if err != nil {
			return nil, fmt.Errorf("--class-shards %s=%s: %w", class, count, err)
		}
		if _, dup := out[class]; dup {
			return nil, fmt.Errorf("--class-shards: %s is named twice", class)
		}
		out[class] = n
	}
	return out, nil
}
