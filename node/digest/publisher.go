package digest

import (
	"context"
	"log/slog"
	"time"

	"github.com/e31network/e31/market"
	"github.com/e31network/e31/node/task"
	"github.com/e31network/e31/node/wire"
	"github.com/e31network/e31/p2p"
	"github.com/e31network/e31/p2p/peertext"
	"github.com/libp2p/go-libp2p/core/peer"
	ma "github.com/multiformats/go-multiaddr"
)

// Publisher publishes this node's shard's digest when it is the node's
// turn (Decide). It runs only on a node that offers GPUs, which alone is
// a member of its shard. Every field is set before Run and never changed
// after; the parts it calls lock themselves, and it holds no lock.
type Publisher struct {
	Self   peer.ID
	Shard  p2p.Shard
	Timing Timing
	Book   *Book
	// Since is when the node began to hear the digest topic.
	Since time.Time
	// View is the node's view of its shard's market at now.
	View func(now time.Time) market.View
	// ViewHash is the hash of the view of the node's last epoch's Match,
	// "" before its first.
	ViewHash func() string
	// Addrs is where a provider of the view listens, by peer ID.
	Addrs func(id string) []string
	// Publish signs and publishes a digest on the digest topic.
	Publish func(ctx context.Context, b wire.DigestBody) error
	Log     *slog.Logger
}

// Run asks whether it is the node's turn a dozen times a round, until ctx
// ends.
func (p *Publisher) Run(ctx context.Context) {
	task.Every(ctx, max(p.Timing.every()/12, 10*time.Millisecond), func(now time.Time) { p.Once(ctx, now) })
}

// Once publishes the shard's digest if it is the node's turn at now, and
// reports whether it did.
func (p *Publisher) Once(ctx context.Context, now time.Time) bool {
	v := p.View(now)
	fresh := Build(p.Shard, v)
	members := p.members(v)
	turn := Turn{Self: p.Self, Members: members, Now: now, Since: p.Since, Fresh: fresh}
	if last, ok := p.Book.Last(fresh.Shard); ok {
		turn.Last = &last
	}
	publish, why := p.Timing.Decide(turn)
	if !publish {
		return false
	}
	if p.ViewHash != nil {
		fresh.ViewHash = p.ViewHash()
	}
	for _, id := range Order(Round(now, p.Timing.every()), members)[:min(len(members), wire.MaxDigestMembers)] {
		fresh.Members = append(fresh.Members, wire.DigestMember{ID: id.String(), Addrs: memberAddrs(p.Addrs(id.String()))})
	}
	if err := p.Publish(ctx, fresh); err != nil {
		p.Log.Debug("digest not published", "shard", fresh.Shard.String(), "why", why, "err", err)
		return false
	}
	p.Log.Debug("digest published", "shard", fresh.Shard.String(), "why", why, "providers", fresh.Providers, "queued", fresh.Queued)
	return true
}

// members are the shard's members in v: the providers whose offers it
// holds that are of the shard, and this node.
func (p *Publisher) members(v market.View) []peer.ID {
	shard := p.Shard
	shard.Count = max(shard.Count, 1)
	out := []peer.ID{p.Self}
	for _, o := range v.Offers {
		id, err := peer.Decode(o.Provider)
		if err != nil || id == p.Self || wire.DigestShard(id, shard) != shard {
			continue
		}
		out = append(out, id)
	}
	return out
}

// memberAddrs are the first of addrs a digest may carry: at most
// MaxDigestMemberAddrs, each a multiaddr within wire's bounds.
func memberAddrs(addrs []string) []string {
	out := []string{}
	for _, a := range addrs {
		if len(out) == wire.MaxDigestMemberAddrs {
			break
		}
		if len(a) > wire.MaxStringLen || peertext.Check(a) != nil {
			continue
		}
		if _, err := ma.NewMultiaddr(a); err == nil {
			out = append(out, a)
		}
	}
	return out
}
