package scale

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/e31network/e31/ledger"
	"github.com/e31network/e31/market"
	"github.com/e31network/e31/node/task"
	"github.com/e31network/e31/node/wire"
	"github.com/e31network/e31/p2p"
	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"
)

// classFar drives a class network (classNet) through the neighbours, who
// are subscribed to every one of its topics: each provider's offer every
// heartbeat on its subshard's offers topic, each subshard's share of the
// jobs (declared in it, leased by one of its providers, released) on its
// jobs topic, and each subshard's digest once a round on the digest topic,
// signed by the member every peer elects.
//
// Gossipsub sends a topic's messages only to peers subscribed to it, and
// the neighbours are connected to the daemon alone: a message on a topic
// the daemon has not joined reaches no one. The driver therefore seals
// only the messages of topics the daemon has joined (live, looked up
// every second), which lets one machine carry a network of 100,000
// providers, and makes the daemon pay for exactly the topics it joins,
// a market it follows from the moment it joins it.
type classFar struct {
	// Immutable after newClassFar.
	net        *classNet
	submitters []crypto.PrivKey
	subIDs     []string
	neighbours []*neighbour
	digestName string
	offerNames []string // by subshard
	jobNames   []string // by subshard

	live atomic.Pointer[map[string]bool] // topics the daemon has joined, by full name
	counters

	mu  sync.Mutex // state lock: guards rng
	rng *rand.Rand // the publish order (spread)
}

func newClassFar(net *classNet, submitters int, ns []*neighbour) (*classFar, error) {
	f := &classFar{net: net, neighbours: ns, rng: rand.New(rand.NewPCG(5, 6)),
		digestName: p2p.TopicName(net.network, p2p.TopicDigest)}
	for range submitters {
		k, _, err := crypto.GenerateEd25519Key(nil)
		if err != nil {
			return nil, err
		}
		id, err := peer.IDFromPrivateKey(k)
		if err != nil {
			return nil, err
		}
		f.submitters, f.subIDs = append(f.submitters, k), append(f.subIDs, id.String())
	}
	for j := range net.subs {
		scope := net.subs[j].shard.Scope(net.network)
		f.offerNames = append(f.offerNames, p2p.TopicName(scope, p2p.TopicOffers))
		f.jobNames = append(f.jobNames, p2p.TopicName(scope, p2p.TopicJobs))
	}
	empty := map[string]bool{}
	f.live.Store(&empty)
	return f, nil
}

// isLive reports whether the daemon has joined topic.
func (f *classFar) isLive(topic string) bool { return (*f.live.Load())[topic] }

// watchLive looks up every second which topics the daemon has joined, as
// the first neighbour sees them (every neighbour is connected to the
// daemon alone, and hears the same subscriptions), until ctx ends.
func (f *classFar) watchLive(ctx context.Context) {
	task.Every(ctx, time.Second, func(time.Time) { f.refreshLive() })
}

func (f *classFar) refreshLive() {
	live := map[string]bool{}
	for name, t := range f.neighbours[0].topics {
		if len(t.ListPeers()) > 0 {
			live[name] = true
		}
	}
	f.live.Store(&live)
}

// liveTopics are the topics the daemon has joined now.
func (f *classFar) liveTopics() []string {
	f.refreshLive()
	var out []string
	for _, name := range f.net.topics() {
		if f.isLive(name) {
			out = append(out, name)
		}
	}
	return out
}

// spread hands one message to every neighbour, in an order that changes
// from message to message.
func (f *classFar) spread(ctx context.Context, topic string, raw []byte) {
	f.mu.Lock()
	start := f.rng.IntN(len(f.neighbours))
	f.mu.Unlock()
	for k := range f.neighbours {
		n := f.neighbours[(start+k)%len(f.neighbours)]
		if err := n.topics[topic].Publish(ctx, raw); err != nil && ctx.Err() == nil {
			f.failed.Add(1)
		}
	}
}

// send seals body as key's message of kind and spreads it on topic.
func (f *classFar) send(ctx context.Context, topic string, key crypto.PrivKey, kind string, body any, counter int) {
	s, err := p2p.Seal(key, kind, body, time.Now())
	if err != nil {
		f.failed.Add(1)
		return
	}
	f.spread(ctx, topic, s.Raw)
	f.sent[counter].Add(1)
}

// runOffers sends every provider's offer once a heartbeat, the providers
// spread evenly over it, those of subshards the daemon hears, until ctx
// ends.
func (f *classFar) runOffers(ctx context.Context) {
	const tick = 20 * time.Millisecond
	n := len(f.net.ids)
	t := time.NewTicker(tick)
	defer t.Stop()
	begin := time.Now()
	next := 0
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			due := int(float64(now.Sub(begin)) / float64(f.net.heartbeat) * float64(n))
			for ; next < due; next++ {
				i := next % n
				topic := f.offerNames[f.net.sub[i]]
				if !f.isLive(topic) {
					continue
				}
				f.send(ctx, topic, f.net.keys[i], wire.KindOffer, f.net.offer(i), sentOffers)
			}
		}
	}
}

// runJobs declares rate jobs a second over the whole network, job i in
// the subshard of provider i modulo the providers (so that each subshard
// has its share), for that provider to lease after wait and release after
// run (run 0: withdrawn after wait), those of subshards the daemon hears,
// until ctx ends.
func (f *classFar) runJobs(ctx context.Context, g *task.Group, rate float64, wait, run time.Duration) {
	if rate <= 0 {
		return
	}
	const tick = 20 * time.Millisecond
	t := time.NewTicker(tick)
	defer t.Stop()
	begin := time.Now()
	next := 0
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			due := int(now.Sub(begin).Seconds() * rate)
			for ; next < due; next++ {
				p := next % len(f.net.ids)
				j := f.net.sub[p]
				if !f.isLive(f.jobNames[j]) {
					continue
				}
				f.declare(ctx, g, next, p, wait, run)
			}
		}
	}
}

// declare publishes job i, meant for provider p, in p's subshard, and
// has it leased, released or withdrawn in its turn.
func (f *classFar) declare(ctx context.Context, g *task.Group, i, p int, wait, run time.Duration) {
	net := f.net
	j := net.sub[p]
	s := &net.subs[j]
	body := net.declaration(i, p)
	d, gpus := body.Declaration, body.Declaration.Request.GPUs
	sub := i % len(f.submitters)
	signed, err := p2p.Seal(f.submitters[sub], wire.KindDeclaration, body, time.Now())
	if err != nil {
		f.failed.Add(1)
		return
	}
	topic := f.jobNames[j]
	f.spread(ctx, topic, signed.Raw)
	f.sent[sentJobs].Add(1)
	s.open.Add(1)
	job := wire.JobID(signed)
	g.Go(func() {
		defer func() {
			if ctx.Err() != nil {
				s.open.Add(-1)
			}
		}()
		if task.Sleep(ctx, wait) != nil {
			return
		}
		s.open.Add(-1)
		slot, ok := f.take(p, gpus)
		if run == 0 || !ok {
			f.send(ctx, topic, f.submitters[sub], wire.KindWithdrawal, wire.WithdrawalBody{Job: job}, sentJobs)
			return
		}
		defer net.leased[p].And(^slot)
		f.lease(ctx, topic, i, p, job, sub, d, slot, run)
	})
}

// declaration is far job i, meant for provider p: two GPUs (one on a
// one-GPU box) of the model of p's box, declared in p's subshard.
func (c *classNet) declaration(i, p int) wire.DeclarationBody {
	k := c.kinds[p]
	d := market.NewDeclaration(fmt.Sprintf("scale-%d", i), []string{"python", "train.py"}, min(2, k.gpus), market.Hour, nil)
	d.Request.Memory = 8 * market.GiB
	d.Request.GPUModel = requestModel(k)
	shard := c.subs[c.sub[p]].shard
	return wire.DeclarationBody{Declaration: d, Market: &shard}
}

// requestModel is the model a far job asks for to fit boxes of kind k:
// its family, as a submitter writes it.
func requestModel(k boxKind) string {
	if k.pool == "consumer" {
		return "RTX 4090"
	}
	return market.ModelFamily(k.model)
}

// take marks gpus free GPUs of provider p leased, the lowest first, and
// returns their bits; ok is false when p has not that many free.
func (f *classFar) take(p, gpus int) (bits uint64, ok bool) {
	w := &f.net.leased[p]
	for {
		held := w.Load()
		bits = 0
		for g := range f.net.kinds[p].gpus {
			if held&(1<<g) == 0 && bitsCount(bits) < gpus {
				bits |= 1 << g
			}
		}
		if bitsCount(bits) < gpus {
			return 0, false
		}
		if w.CompareAndSwap(held, held|bits) {
			return bits, true
		}
	}
}

func bitsCount(b uint64) int {
	n := 0
	for ; b != 0; b &= b - 1 {
		n++
	}
	return n
}

// lease announces provider p's lease of job i on the GPUs of slot,
// signed by both, and after run its release.
func (f *classFar) lease(ctx context.Context, topic string, i, p int, job string, sub int, d market.Declaration, slot uint64, run time.Duration) {
	net := f.net
	id := net.ids[p].String()
	var gpus []string
	for g := range net.kinds[p].gpus {
		if slot&(1<<g) != 0 {
			gpus = append(gpus, gpuUUIDOf(id, g))
		}
	}
	now := time.Now().UnixMilli()
	terms := wire.LeaseTerms{
		ID: wire.LeaseID(job, id, now, uint64(i)), Job: job, Provider: id, Submitter: f.subIDs[sub], GPUs: gpus,
		CPUs: d.Request.CPUs, MemoryBytes: uint64(d.Request.Memory), Limit: d.Request.Limit,
		Proposed: now, Expires: now + 10_000,
	}
	l := wire.SignedLease{Terms: terms}
	if l.SignProvider(net.keys[p]) != nil || l.Countersign(f.submitters[sub]) != nil {
		f.failed.Add(1)
		return
	}
	f.send(ctx, topic, net.keys[p], wire.KindLease, l, sentJobs)
	if task.Sleep(ctx, run) != nil {
		return
	}
	f.send(ctx, topic, net.keys[p], wire.KindRelease, wire.ReleaseBody{
		Lease: terms.ID, Job: job, Provider: id, Submitter: terms.Submitter, GPUs: terms.GPUs,
		Outcome: ledger.OutcomeCompleted, Attribution: ledger.AttributionJob,
		HeldMs: run.Milliseconds(), At: time.Now().UnixMilli(),
	}, sentJobs)
}

// runDigests publishes each subshard's digest once a round of every, as
// the member every peer elects for the round would: the first round's
// spread over its first seconds, so that the whole market's shape is
// known early, later ones spread over the round. wait is how long the far
// jobs stay queued. Until ctx ends.
func (f *classFar) runDigests(ctx context.Context, every, wait time.Duration) {
	n := len(f.net.subs)
	const first = 5 * time.Second
	begin := time.Now()
	at := func(k int) time.Time {
		round, j := k/n, k%n
		if round == 0 {
			return begin.Add(first * time.Duration(j) / time.Duration(n))
		}
		return begin.Add(first + every*time.Duration(round-1) + every*time.Duration(j)/time.Duration(n))
	}
	for k := 0; ; k++ {
		if task.Sleep(ctx, time.Until(at(k))) != nil {
			return
		}
		j := k % n
		now := time.Now()
		p := f.net.publisher(j, now, every)
		f.send(ctx, f.digestName, f.net.keys[p], wire.KindDigest, f.net.digest(j, now, wait), sentDigests)
	}
}
