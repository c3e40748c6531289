package submitter

import (
	"context"
	"errors"
	"fmt"

	"github.com/e31network/e31/node/api"
	"github.com/e31network/e31/p2p"
)

// Follower follows, for this node's jobs, the class markets other than
// the one it takes part in (node.MarketClasses): a job is declared where
// market.Route finds capacity, and its submitter must publish on that
// market's jobs topic and judge proposals against that market's offers
// and Match.
type Follower interface {
	// Follow follows market m from now on, unless it does already: it
	// joins m's offers and jobs topics and reaches the members m's digest
	// names, so that the topics have peers. The node leaves m a while after
	// no job of this node is open there (Submitter.Markets).
	Follow(ctx context.Context, m p2p.Shard) (Followed, error)
	// Followed is market m, if this node follows it.
	Followed(m p2p.Shard) (Followed, bool)
}

// Followed is a market this node follows for its jobs.
type Followed interface {
	// Publisher publishes on the market's topics (p2p.Market).
	Publisher
	// Offers are the market's offers as this node heard them.
	Offers() Offers
	// Placement is this node's Match on its view of the market as it
	// stands (epoch.Judge); no epoch of this node's passes there.
	Placement() Placement
}

// errNotFollowed is why a job of a market this node does not follow
// cannot be published or judged.
var errNotFollowed = errors.New("this node follows no market but its own (not a class market)")

// ownMarket reports whether a job declared in m is of the market this node
// takes part in: m names none (a network not split by class, or a record
// from before jobs named their market) or names this node's.
func (p *parts) ownMarket(m *p2p.Shard) bool {
	return m == nil || p.d.Markets == nil || sameMarket(*m, p.d.Markets.Own)
}

// sameMarket reports whether a and b are the same market.
func sameMarket(a, b p2p.Shard) bool {
	return a.Class == b.Class && a.Index == b.Index && max(a.Count, 1) == max(b.Count, 1)
}

// jobsTopic is where the messages of a job declared in m go: the node's own
// topics for its own market, else m's, which this node follows from then
// on.
func (p *parts) jobsTopic(ctx context.Context, m *p2p.Shard) (Publisher, error) {
	if p.ownMarket(m) {
		return p.d.Gossip, nil
	}
	if p.d.Markets.Follow == nil {
		return nil, fmt.Errorf("market %s: %w", m, errNotFollowed)
	}
	f, err := p.d.Markets.Follow.Follow(ctx, *m)
	if err != nil {
		return nil, fmt.Errorf("follow market %s: %w", m, err)
	}
	return f, nil
}

// publishJob signs body as a message of kind and publishes it on the jobs
// topic of market m, a job's (jobsTopic).
func (p *parts) publishJob(ctx context.Context, m *p2p.Shard, kind string, body any) error {
	pub, err := p.jobsTopic(ctx, m)
	if err != nil {
		return err
	}
	_, err = pub.Publish(ctx, p2p.TopicJobs, kind, body)
	return err
}

// publishJobRaw publishes a sealed envelope on the jobs topic of market m.
func (p *parts) publishJobRaw(ctx context.Context, m *p2p.Shard, raw []byte) error {
	pub, err := p.jobsTopic(ctx, m)
	if err != nil {
		return err
	}
	return pub.PublishRaw(ctx, p2p.TopicJobs, raw)
}

// judgedIn is what proposals for a job of market m are checked against:
// the offers and the placement of this node's own market, or those of m
// as this node follows it; ok is false for a market not followed.
func (p *parts) judgedIn(m *p2p.Shard) (offers Offers, placement Placement, ok bool) {
	if p.ownMarket(m) {
		return p.d.Offers, p.d.Placement, true
	}
	if p.d.Markets.Follow == nil {
		return nil, nil, false
	}
	f, ok := p.d.Markets.Follow.Followed(*m)
	if !ok {
		return nil, nil, false
	}
	return f.Offers(), f.Placement(), true
}

// marketOf is the market job j was declared in; nil: this node's own.
func marketOf(j *jobTracker) *p2p.Shard {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.rec.Market
}

// OpenMarket is a market, other than this node's own, in which a job of
// this node is open (Submitter.Markets).
type OpenMarket struct {
	Shard p2p.Shard
	// Placing says a job of this node there is queued or its lease not
	// yet running: proposals for it are judged on the market's offers.
	// Once every job there runs, the offers are not needed.
	Placing bool
}

// Markets are the markets of this node's open jobs other than its own:
// those it must follow (Follower), each with whether a job there is being
// placed.
func (s *kit) Markets() []OpenMarket {
	var out []OpenMarket
	at := map[p2p.Shard]int{}
	for _, j := range s.jobs.live() {
		j.mu.Lock()
		m, open, state := j.rec.Market, !j.rec.terminal(), j.rec.State
		j.mu.Unlock()
		if !open || s.ownMarket(m) {
			continue
		}
		k := p2p.Shard{Class: m.Class, Index: m.Index, Count: max(m.Count, 1)}
		i, seen := at[k]
		if !seen {
			i = len(out)
			at[k] = i
			out = append(out, OpenMarket{Shard: k})
		}
		if state == api.JobQueued || state == api.JobRenting {
			out[i].Placing = true
		}
	}
	return out
}

// marketKey names the market of a job's messages, as a map key: own for
// this node's own market, else the shard of another.
type marketKey struct {
	own   bool
	shard p2p.Shard
}

// keyOf is the key of market m, a job's.
func (p *parts) keyOf(m *p2p.Shard) marketKey {
	if p.ownMarket(m) {
		return marketKey{own: true}
	}
	return marketKey{shard: p2p.Shard{Class: m.Class, Index: m.Index, Count: max(m.Count, 1)}}
}

// market is the market k names; nil: this node's own.
func (k marketKey) market() *p2p.Shard {
	if k.own {
		return nil
	}
	s := k.shard
	return &s
}

// String names k's market in a log line.
func (k marketKey) String() string {
	if k.own {
		return "own"
	}
	return k.shard.String()
}
