package digest

import (
	"cmp"
	"slices"

	"github.com/e31network/e31/market"
	"github.com/e31network/e31/node/wire"
	"github.com/e31network/e31/p2p"
)

// Build is the digest of shard from a view of its market (the view a pass
// between epochs decides on): the providers that take work now (neither
// draining, closed nor unreachable), how many GPUs each has free, leased
// ones held whatever its offer says, the jobs queued and the GPUs they
// ask, how long the oldest has waited by the view's Now, and the largest
// roots its providers list as held, with how many hold each. Members and
// the view hash are the publisher's to add.
func Build(shard p2p.Shard, v market.View) wire.DigestBody {
	shard.Count = max(shard.Count, 1)
	b := wire.DigestBody{Shard: shard, FreeBoxes: []int{}}
	leased := make(map[string]bool)
	for _, l := range v.Leases {
		for _, g := range l.GPUs {
			leased[g] = true
		}
	}
	type held struct {
		bytes   uint64
		holders int
	}
	roots := make(map[string]*held)
	for _, o := range v.Offers {
		if o.Draining || o.Closed || o.Unreachable {
			continue
		}
		b.Providers++
		free := 0
		for _, g := range o.GPUs {
			if g.Free && !leased[g.UUID] {
				free++
			}
		}
		k := min(free, market.MaxDigestBuckets-1)
		for len(b.FreeBoxes) <= k {
			b.FreeBoxes = append(b.FreeBoxes, 0)
		}
		b.FreeBoxes[k]++
		for _, d := range o.Holdings.Roots {
			h := roots[d.Root]
			if h == nil {
				h = &held{}
				roots[d.Root] = h
			}
			h.bytes = max(h.bytes, d.Size)
			h.holders++
		}
	}
	oldest := v.Now
	for _, j := range v.Jobs {
		b.Queued++
		b.QueuedGPUs += j.Request.GPUs * max(j.Request.Nodes, 1)
		oldest = min(oldest, j.SubmittedAt)
	}
	b.OldestWaitMs = min(max(v.Now-oldest, 0), wire.MaxDigestWaitMs)
	for r, h := range roots {
		b.Held = append(b.Held, market.HeldRoot{Root: r, Bytes: h.bytes, Holders: h.holders})
	}
	slices.SortFunc(b.Held, func(x, y market.HeldRoot) int {
		if c := cmp.Compare(y.Bytes, x.Bytes); c != 0 {
			return c
		}
		return cmp.Compare(x.Root, y.Root)
	})
	b.Held = b.Held[:min(len(b.Held), market.MaxDigestHeld)]
	if len(b.Held) == 0 {
		b.Held = nil
	}
	return b
}
