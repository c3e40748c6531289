package scale

import (
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/e31network/e31/market"
	"github.com/e31network/e31/node/digest"
	"github.com/e31network/e31/node/wire"
	"github.com/e31network/e31/p2p"
	"github.com/ipfs/go-cid"
	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/multiformats/go-multihash"
)

// classNet is the far network of a class-split market (e31d --market
// classes): the providers of the mix (boxMix, as the market
// simulation's trace has them), each in the subshard of its class that its
// peer ID picks (p2p.ClassShardOf), every class split into as many
// subshards as keep each at or below p2p.ShardProviders (the counts the
// daemon is told with --class-shards), and what each provider lists as
// held: 0 to maxHeld CIDs of a shared pool, so that offers are as large
// as real ones.
//
// Immutable after newClassNet but for leased, whose words are atomic.
type classNet struct {
	network   string
	heartbeat time.Duration
	keys      []crypto.PrivKey
	ids       []peer.ID
	kinds     []boxKind
	// sub is each provider's subshard, an index into subs.
	sub  []int
	subs []classSub
	// counts is each class's subshard count, by class.
	counts map[string]int
	// roots is the pool of content the providers hold.
	roots []market.Datum
	// leased is each provider's GPUs held by a lease of the far network,
	// a bit per GPU index.
	leased []atomic.Uint64
}

// classSub is one class market, or subshard of one, and its providers.
type classSub struct {
	shard   p2p.Shard
	members []int // provider indices, in order
	ids     []peer.ID
	// open is the far network's jobs declared there and not yet leased or
	// withdrawn.
	open atomic.Int64
}

// maxHeld is the most roots a far provider lists as held: a provider that
// has run jobs for a while caches their inputs and images.
const maxHeld = 40

// newClassNet makes the far network of n providers, with keys derived as
// providerKey derives them, each offering every heartbeat on network.
func newClassNet(network string, n int, heartbeat time.Duration) (*classNet, error) {
	if n < 1 {
		return nil, fmt.Errorf("scale: %d providers: want at least 1", n)
	}
	c := &classNet{network: network, heartbeat: heartbeat, counts: map[string]int{}}
	c.kinds = classMix(n)
	perClass := map[string]int{}
	classes := make([]string, len(c.kinds))
	for i, k := range c.kinds {
		classes[i] = string(market.ClassOf(boxGPUs(k, "")))
		perClass[classes[i]]++
	}
	for class, count := range perClass {
		c.counts[class] = p2p.SuggestShards(count)
	}
	index := map[p2p.Shard]int{}
	c.sub = make([]int, n)
	c.leased = make([]atomic.Uint64, n)
	for i := range n {
		k, err := providerKey(i)
		if err != nil {
			return nil, err
		}
		id, err := peer.IDFromPrivateKey(k)
		if err != nil {
			return nil, err
		}
		c.keys, c.ids = append(c.keys, k), append(c.ids, id)
		s := marketShard(p2p.ClassShardOf(id, classes[i], c.counts[classes[i]]))
		j, ok := index[s]
		if !ok {
			j = len(c.subs)
			index[s] = j
			c.subs = append(c.subs, classSub{shard: s})
		}
		c.subs[j].members = append(c.subs[j].members, i)
		c.subs[j].ids = append(c.subs[j].ids, id)
		c.sub[i] = j
	}
	// Subshards in a fixed order, whatever the keys: by class, then index.
	order := make([]int, len(c.subs))
	for j := range order {
		order[j] = j
	}
	slices.SortFunc(order, func(a, b int) int {
		return cmp.Or(cmp.Compare(c.subs[a].shard.Class, c.subs[b].shard.Class), cmp.Compare(c.subs[a].shard.Index, c.subs[b].shard.Index))
	})
	subs := make([]classSub, len(c.subs))
	where := make([]int, len(c.subs))
	for to, from := range order {
		subs[to].shard, subs[to].members, subs[to].ids = c.subs[from].shard, c.subs[from].members, c.subs[from].ids
		where[from] = to
	}
	c.subs = subs
	for i := range c.sub {
		c.sub[i] = where[c.sub[i]]
	}
	c.roots = rootPool(max(n/4, 64))
	return c, nil
}

// classMix is the kinds of n providers, as NewTrace draws them: the rare
// kinds by count, the consumer cards the rest, in a fixed interleaved
// order (the keys place them in subshards).
func classMix(n int) []boxKind {
	var kinds []boxKind
	rest := n
	for _, k := range boxMix() {
		c := int(float64(n)*k.share + 0.5)
		rest -= c
		for range c {
			kinds = append(kinds, k)
		}
	}
	for range max(rest, 0) {
		kinds = append(kinds, consumerBox())
	}
	kinds = kinds[:n]
	rng := rand.New(rand.NewPCG(3, 4))
	rng.Shuffle(len(kinds), func(i, j int) { kinds[i], kinds[j] = kinds[j], kinds[i] })
	return kinds
}

// marketShard is s as a market is named: a class market's count is 1,
// never 0.
func marketShard(s p2p.Shard) p2p.Shard {
	s.Count = max(s.Count, 1)
	return s
}

// boxGPUs are the GPUs of a box of kind k, all listed free, as a provider
// lists them; id names their UUIDs.
func boxGPUs(k boxKind, id string) []market.GPU {
	gpus := make([]market.GPU, k.gpus)
	for g := range gpus {
		gpus[g] = market.GPU{Index: g, UUID: gpuUUIDOf(id, g), Model: k.model, MemoryBytes: k.mem, Free: true}
	}
	return gpus
}

// gpuUUIDOf names the g-th GPU of the provider id.
func gpuUUIDOf(id string, g int) string {
	return fmt.Sprintf("GPU-%s-%d", id[max(len(id)-12, 0):], g)
}

// rootPool is n content roots with sizes from 1 to 64 GiB.
func rootPool(n int) []market.Datum {
	out := make([]market.Datum, n)
	for k := range out {
		sum := sha256.Sum256([]byte("e31-scale-root-" + strconv.Itoa(k)))
		mh, err := multihash.Encode(sum[:], multihash.SHA2_256)
		if err != nil {
			panic(err) // a SHA-256 digest always encodes
		}
		out[k] = market.Datum{Root: cid.NewCidV1(cid.DagProtobuf, mh).String(), Size: uint64(1+int(sum[0])%64) << 30}
	}
	return out
}

// ClassShards is the --class-shards value that splits each class as this
// network is split: CLASS=N for each class of more than one subshard.
func (c *classNet) ClassShards() string {
	var out []string
	for class, n := range c.counts {
		if n > 1 {
			out = append(out, class+"="+strconv.Itoa(n))
		}
	}
	slices.Sort(out)
	return strings.Join(out, ",")
}

// holdings is what provider i lists as held: 0 to maxHeld roots of the
// pool, the same at every heartbeat.
func (c *classNet) holdings(i int) market.Holdings {
	rng := rand.New(rand.NewPCG(uint64(i), 0x686f6c64)) // "hold"
	n := rng.IntN(maxHeld + 1)
	held := make([]market.Datum, n)
	for k := range held {
		held[k] = c.roots[rng.IntN(len(c.roots))]
	}
	return market.NewHoldings(held)
}

// offer is provider i's offer: its box, every GPU listed free, and what
// it holds.
func (c *classNet) offer(i int) wire.OfferBody {
	id := c.ids[i].String()
	k := c.kinds[i]
	o := market.Offer{Provider: id, GPUs: boxGPUs(k, id), CPUs: 16 * k.gpus, MemoryBytes: uint64(k.gpus) * 128 << 30,
		Holdings: c.holdings(i)}
	return wire.OfferBody{Offer: o, Addrs: []string{"/ip4/127.0.0.1/tcp/9"}, HeartbeatMs: c.heartbeat.Milliseconds()}
}

// publisher is the member of subshard j that publishes its digest in the
// round of now, as every peer elects it (digest.Order).
func (c *classNet) publisher(j int, now time.Time, every time.Duration) int {
	s := &c.subs[j]
	first := digest.Order(digest.Round(now, every), s.ids)[0]
	return s.members[slices.Index(s.ids, first)]
}

// digest is subshard j's digest as its publisher would build it now from
// its view: every member's offer, the far network's leases on them, the
// jobs open there (queued for about wait), its view hash and up to
// wire.MaxDigestMembers members.
func (c *classNet) digest(j int, now time.Time, wait time.Duration) wire.DigestBody {
	s := &c.subs[j]
	v := market.View{Now: now.UnixMilli()}
	for _, i := range s.members {
		id := c.ids[i].String()
		k := c.kinds[i]
		v.Offers = append(v.Offers, market.Offer{Provider: id, GPUs: boxGPUs(k, id), Holdings: c.holdings(i)})
		if held := c.leased[i].Load(); held != 0 {
			l := market.Lease{Provider: id}
			for g := range k.gpus {
				if held&(1<<g) != 0 {
					l.GPUs = append(l.GPUs, gpuUUIDOf(id, g))
				}
			}
			v.Leases = append(v.Leases, l)
		}
	}
	b := digest.Build(s.shard, v)
	if open := int(max(s.open.Load(), 0)); open > 0 {
		b.Queued, b.QueuedGPUs, b.OldestWaitMs = open, 2*open, wait.Milliseconds()
	}
	h := sha256.Sum256([]byte(fmt.Sprintf("%s %d", s.shard, now.UnixMilli())))
	b.ViewHash = hex.EncodeToString(h[:])
	for _, i := range s.members[:min(len(s.members), wire.MaxDigestMembers)] {
		b.Members = append(b.Members, wire.DigestMember{ID: c.ids[i].String(), Addrs: []string{"/ip4/127.0.0.1/tcp/9"}})
	}
	return b
}

// topics are the full names of every topic of the far network: the
// digest topic and each subshard's offers and jobs.
func (c *classNet) topics() []string {
	out := []string{p2p.TopicName(c.network, p2p.TopicDigest)}
	for j := range c.subs {
		scope := c.subs[j].shard.Scope(c.network)
		out = append(out, p2p.TopicName(scope, p2p.TopicOffers), p2p.TopicName(scope, p2p.TopicJobs))
	}
	return out
}
