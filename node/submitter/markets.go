package submitter

import (
	"fmt"
	"math/rand/v2"
	"strings"

	"github.com/e31network/e31/market"
	"github.com/e31network/e31/p2p"
)

// digests are the summaries of the network's subshards this node has
// heard (market.Digest); nil or empty when it has heard none.
type digests interface {
	Digests() []market.Digest
}

// Markets chooses the market a job is declared in, in a network split by
// resource class (node.MarketClasses). Immutable once handed to New.
type Markets struct {
	// Own is the class market, or subshard, this node takes part in: the
	// one whose offers and jobs topics it follows.
	Own p2p.Shard
	// Digests are the network's subshards as their digests tell; nil:
	// none known.
	Digests digests
	// Draw returns a number in [0, n), for market.Route's two random
	// choices; nil: math/rand/v2.
	Draw func(n int) int
	// Follow follows the markets of this node's jobs other than Own; nil:
	// a job is declared only in Own.
	Follow Follower
}

// choose is the market a job asking r, reading roots, is declared in:
// the subshard market.Route picks, on the digests known, among every
// market's when this node can follow another (Follow; it countersigns a
// proposal only against its own Match of the job's market, so it follows
// the market chosen), else among its own's; failing that, its own market
// when its class fits r. A job that fits no market this node can follow
// is refused, naming the class it is in.
func (m *Markets) choose(r market.Request, roots []string) (p2p.Shard, error) {
	var followed []market.Digest
	var elsewhere []string // markets that fit, as the digests tell, not followed
	if m.Digests != nil {
		for _, d := range m.Digests.Digests() {
			switch {
			case m.follows(d) || m.Follow != nil:
				followed = append(followed, d)
			case d.Class.Fits(r) && d.Providers >= max(r.Nodes, 1) && len(elsewhere) < 3:
				elsewhere = append(elsewhere, p2p.Shard{Class: string(d.Class), Index: d.Index, Count: max(d.Count, 1)}.String())
			}
		}
	}
	draw := m.Draw
	if draw == nil {
		draw = rand.IntN
	}
	if d, ok := market.Route(r, roots, followed, draw); ok {
		return p2p.Shard{Class: string(d.Class), Index: d.Index, Count: max(d.Count, 1)}, nil
	}
	if market.Class(m.Own.Class).Fits(r) {
		return m.Own, nil
	}
	if len(elsewhere) > 0 {
		return p2p.Shard{}, fmt.Errorf("the job fits no class market this node takes part in: this node is in %s, whose boxes cannot hold %s; the digests show it fits %s: submit it from a node there",
			m.Own, requestText(r), strings.Join(elsewhere, ", "))
	}
	if m.Follow != nil {
		return p2p.Shard{}, fmt.Errorf("the job fits no class market the digests show: this node is in %s, whose boxes cannot hold %s, and no other market's digest shows boxes that can",
			m.Own, requestText(r))
	}
	return p2p.Shard{}, fmt.Errorf("the job fits no class market this node takes part in: this node is in %s, whose boxes cannot hold %s; submit it from a node of a class that fits it",
		m.Own, requestText(r))
}

// follows reports whether d is the digest of the market this node takes
// part in.
func (m *Markets) follows(d market.Digest) bool {
	return string(d.Class) == m.Own.Class && d.Index == m.Own.Index && max(d.Count, 1) == max(m.Own.Count, 1)
}

// requestText names what a request asks of one box, for an error.
func requestText(r market.Request) string {
	s := fmt.Sprintf("%d GPUs", r.GPUs)
	if r.GPUs == 1 {
		s = "1 GPU"
	}
	if r.GPUModel != "" {
		s += " " + r.GPUModel
	}
	if r.GPUMemory > 0 {
		s += fmt.Sprintf(" of %s", r.GPUMemory)
	}
	return s
}

// sourceRoots are the inputs a declaration names, for market.Route to
// find a market whose providers hold one.
func sourceRoots(decl market.Declaration) []string {
	out := make([]string, 0, len(decl.Data))
	for _, in := range decl.Data {
		out = append(out, in.Source)
	}
	return out
}
