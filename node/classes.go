package node

import (
	"errors"
	"fmt"

	"github.com/e31network/e31/market"
	"github.com/e31network/e31/node/compute"
	"github.com/e31network/e31/node/digest"
	"github.com/e31network/e31/node/submitter"
	"github.com/e31network/e31/p2p"
	"github.com/libp2p/go-libp2p/core/peer"
)

// MarketClasses is Config.Market for a network whose market is split by
// resource class (market.Class): a provider offers in its class's market,
// or in the subshard of it that its peer ID picks, and a job is declared
// in a class that fits it.
const MarketClasses = "classes"

// errShardInClasses refuses a chosen shard in class mode.
var errShardInClasses = errors.New("a provider's shard is derived from its class in a class market (--market classes): --shards and --shard do not apply")

// checkMarket checks Config.Market and ClassShards.
func (c Config) checkMarket() error {
	switch c.Market {
	case "":
		if len(c.ClassShards) > 0 {
			return errors.New("class shards are set but the market is not split by class (--market classes)")
		}
		return nil
	case MarketClasses:
	default:
		return fmt.Errorf("market %q: want %q or nothing (one market, or --shards)", c.Market, MarketClasses)
	}
	if c.Shards > 1 || c.Shard != nil {
		return errShardInClasses
	}
	for class, n := range c.ClassShards {
		if _, err := market.ParseClass(class); err != nil {
			return fmt.Errorf("class shards: %w", err)
		}
		if n < 1 || (p2p.Shard{Count: n}).Valid() != nil {
			return fmt.Errorf("class shards: %s=%d: want a power of two from 1 to %d", class, n, p2p.MaxShards)
		}
	}
	return nil
}

// classShards is how many subshards class is split into under cfg: 1
// unless Config.ClassShards says otherwise.
func classShards(cfg Config, class market.Class) int {
	if n := cfg.ClassShards[string(class)]; n > 1 {
		return n
	}
	return 1
}

// classShardOf is the class market, or subshard of it, that a peer self
// with gpus takes part in under cfg: its class is market.ClassOf(gpus)
// ("cpu" without GPUs), its subshard the one its peer ID picks in the
// class (p2p.ClassShardOf). Every peer derives it alike from an offer,
// so that the offers topic's validator can refuse an offer out of place.
func classShardOf(cfg Config, self peer.ID, gpus []market.GPU) p2p.Shard {
	class := market.ClassOf(gpus)
	return p2p.ClassShardOf(self, string(class), classShards(cfg, class))
}

// machineGPUs are the GPUs of m as an offer lists them, for their class.
func machineGPUs(m *compute.Machine) []market.GPU {
	out := make([]market.GPU, 0, len(m.GPUs))
	for _, g := range m.GPUs {
		out = append(out, market.GPU{Index: g.Index, UUID: g.UUID, Model: g.Model, MemoryBytes: g.MemoryBytes})
	}
	return out
}

// markets is how the submitter chooses the market a job is declared in,
// and follows it where it is not this node's own: nil where the network
// is not split by class.
func (n *Node) markets() *submitter.Markets {
	if n.cfg.Market != MarketClasses {
		return nil
	}
	n.follows = newFollows(n)
	return &submitter.Markets{Own: n.shard, Digests: bookDigests{n.digests}, Follow: n.follows}
}

// bookDigests is the network's digests as the node's book holds them
// (digest.go): the latest of each shard, none older than the book keeps.
type bookDigests struct{ book *digest.Book }

func (b bookDigests) Digests() []market.Digest {
	entries := b.book.All()
	out := make([]market.Digest, 0, len(entries))
	for _, e := range entries {
		out = append(out, e.Body.Digest())
	}
	return out
}
