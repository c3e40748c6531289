package scale

import (
	"context"
	"crypto/ed25519"
	"encoding/binary"
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
	pubsub "github.com/libp2p/go-libp2p-pubsub"
	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/peer"
)

// neighbour is one of the daemon's gossip peers: a real gossipsub host on
// 127.0.0.1 that carries the far network's messages to the daemon, and
// takes what the daemon forwards, as a peer of its mesh would. Neighbours
// run no validators (they only relay what the driver made valid) and are
// connected to the daemon only.
type neighbour struct {
	h      host.Host
	topics map[string]*pubsub.Topic
	subs   []*pubsub.Subscription
}

// newNeighbour starts a neighbour on the offers and jobs topics of
// network, keyed by their short names.
func newNeighbour(ctx context.Context, network string) (*neighbour, error) {
	return newNeighbourOn(ctx, map[string]string{
		p2p.TopicOffers: p2p.TopicName(network, p2p.TopicOffers),
		p2p.TopicJobs:   p2p.TopicName(network, p2p.TopicJobs),
	}, 4096)
}

// newNeighbourOn starts a neighbour subscribed to topics (full names, by
// the key its topics map holds them under), each subscription buffering
// buffer messages.
func newNeighbourOn(ctx context.Context, topics map[string]string, buffer int) (*neighbour, error) {
	key, _, err := crypto.GenerateEd25519Key(nil)
	if err != nil {
		return nil, err
	}
	h, err := p2p.NewHost(p2p.HostConfig{Key: key, Listen: []string{"/ip4/127.0.0.1/tcp/0"}, UserAgent: "e31-scale"})
	if err != nil {
		return nil, err
	}
	// The network's own message options and router parameters, so that
	// the daemon sees these as it sees any peer; flood publishing off, as
	// a forwarder sends to its mesh.
	opts := append(p2p.MessageOptions(), pubsub.WithGossipSubParams(p2p.RouterParams()))
	ps, err := pubsub.NewGossipSub(ctx, h, opts...)
	if err != nil {
		h.Close()
		return nil, fmt.Errorf("scale: start gossipsub: %w", err)
	}
	n := &neighbour{h: h, topics: make(map[string]*pubsub.Topic)}
	for key, name := range topics {
		t, err := ps.Join(name)
		if err != nil {
			h.Close()
			return nil, fmt.Errorf("scale: join %s: %w", name, err)
		}
		sub, err := t.Subscribe(pubsub.WithBufferSize(buffer))
		if err != nil {
			h.Close()
			return nil, fmt.Errorf("scale: subscribe %s: %w", name, err)
		}
		n.topics[key] = t
		n.subs = append(n.subs, sub)
	}
	return n, nil
}

// drain reads what the daemon forwards, so that no queue fills.
func (n *neighbour) drain(ctx context.Context, g *task.Group) {
	for _, s := range n.subs {
		g.Go(func() {
			for {
				if _, err := s.Next(ctx); err != nil {
					return
				}
			}
		})
	}
}

func (n *neighbour) connect(ctx context.Context, addrs []string) error {
	if err := p2p.Dial(ctx, n.h, addrs...); err != nil {
		return fmt.Errorf("scale: %w", err)
	}
	return nil
}

// far is the synthetic network beyond the neighbours: its providers, each
// with a key of its own and an offer every heartbeat, and its submitters,
// who take turns to declare the jobs, each job withdrawn after the queue
// wait, as a job leased and gone would leave the open set. A pool of
// submitters rather than a key a job: a daemon admits declarations from
// identities it has not seen at a bounded pace (p2p's new-submitter
// limit), which a network that has run for a while has long passed. Every unique message is
// sealed once and handed to every neighbour, so the daemon receives it
// once from each, as from the mesh.
type far struct {
	providers  []crypto.PrivKey
	ids        []peer.ID
	submitters []crypto.PrivKey
	heartbeat  time.Duration
	neighbours []*neighbour
	silent     atomic.Int64 // index+1 of a provider that stopped offering; 0: none
	counters
	rng *rand.Rand // for the publish order; used by one goroutine at a time (spread)
	mu  sync.Mutex
}

// counters are what a driver made: unique offers, jobs-topic messages
// and digests sent (sent[sentOffers], sent[sentJobs], sent[sentDigests]),
// and the messages it failed to seal or publish.
type counters struct {
	sent   [3]atomic.Uint64
	failed atomic.Uint64
}

// Indices of counters.sent.
const (
	sentOffers = iota
	sentJobs
	sentDigests
)

// providerKey derives the i-th provider's key from a seed, so that runs
// are reproducible and keys cost no entropy.
func providerKey(i int) (crypto.PrivKey, error) {
	var seed [ed25519.SeedSize]byte
	copy(seed[:], "e31-scale-provider")
	binary.BigEndian.PutUint64(seed[24:], uint64(i))
	k, err := crypto.UnmarshalEd25519PrivateKey(ed25519.NewKeyFromSeed(seed[:]))
	if err != nil {
		return nil, err
	}
	return k, nil
}

func newFar(providers, submitters int, heartbeat time.Duration, ns []*neighbour) (*far, error) {
	f := &far{heartbeat: heartbeat, neighbours: ns, rng: rand.New(rand.NewPCG(1, 2))}
	for range submitters {
		k, _, err := crypto.GenerateEd25519Key(nil)
		if err != nil {
			return nil, err
		}
		f.submitters = append(f.submitters, k)
	}
	for i := range providers {
		k, err := providerKey(i)
		if err != nil {
			return nil, err
		}
		id, err := peer.IDFromPrivateKey(k)
		if err != nil {
			return nil, err
		}
		f.providers = append(f.providers, k)
		f.ids = append(f.ids, id)
	}
	return f, nil
}

// offer seals the i-th provider's offer: 8 free simulated H100s.
func (f *far) offer(i int, now time.Time) ([]byte, error) {
	id := f.ids[i].String()
	gpus := make([]market.GPU, 8)
	for k := range gpus {
		gpus[k] = market.GPU{Index: k, UUID: f.gpuUUID(i, k), Model: "H100", MemoryBytes: 80 << 30, Free: true}
	}
	b := wire.OfferBody{Offer: market.Offer{Provider: id, GPUs: gpus, CPUs: 64, MemoryBytes: 1 << 40},
		Addrs: []string{"/ip4/127.0.0.1/tcp/9"}, HeartbeatMs: f.heartbeat.Milliseconds()}
	s, err := p2p.Seal(f.providers[i], wire.KindOffer, b, now)
	if err != nil {
		return nil, err
	}
	return s.Raw, nil
}

// gpuUUID names the k-th GPU of the i-th provider.
func (f *far) gpuUUID(i, k int) string {
	id := f.ids[i].String()
	return fmt.Sprintf("GPU-%s-%d", id[len(id)-12:], k)
}

// spread hands one message to every neighbour, in an order that changes
// from message to message, so that no neighbour is always the first.
func (f *far) spread(ctx context.Context, topic string, raw []byte) {
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

// runOffers sends every provider's offer once a heartbeat, the providers
// spread evenly over it, until ctx ends.
func (f *far) runOffers(ctx context.Context) {
	const tick = 20 * time.Millisecond
	n := len(f.providers)
	t := time.NewTicker(tick)
	defer t.Stop()
	begin := time.Now()
	next := 0 // providers due so far, counted over all heartbeats
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			due := int(float64(now.Sub(begin)) / float64(f.heartbeat) * float64(n))
			for ; next < due; next++ {
				i := next % n
				if int64(i+1) == f.silent.Load() {
					continue
				}
				raw, err := f.offer(i, now)
				if err != nil {
					f.failed.Add(1)
					continue
				}
				f.spread(ctx, p2p.TopicOffers, raw)
				f.sent[sentOffers].Add(1)
			}
		}
	}
}

// runJobs declares rate jobs a second, the submitters in turn; each job
// waits open for wait, and is then leased by a provider of the far
// network for run and released (or, when run is 0, withdrawn), until ctx
// ends.
func (f *far) runJobs(ctx context.Context, g *task.Group, rate float64, wait, run time.Duration) {
	if rate <= 0 {
		return
	}
	t := time.NewTicker(time.Duration(float64(time.Second) / rate))
	defer t.Stop()
	for i := 0; ; i++ {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			key := f.submitters[i%len(f.submitters)]
			d := market.NewDeclaration(fmt.Sprintf("scale-%d", i), []string{"python", "train.py"}, 2, market.Hour, nil)
			d.Request.Memory = 8 * market.GiB
			d.Request.GPUModel = "H100" // not the probe provider's (probe.go)
			s, err := p2p.Seal(key, wire.KindDeclaration, wire.DeclarationBody{Declaration: d}, now)
			if err != nil {
				f.failed.Add(1)
				continue
			}
			f.spread(ctx, p2p.TopicJobs, s.Raw)
			f.sent[sentJobs].Add(1)
			job := wire.JobID(s)
			g.Go(func() {
				if task.Sleep(ctx, wait) != nil {
					return
				}
				if run == 0 {
					f.publish(ctx, key, wire.KindWithdrawal, wire.WithdrawalBody{Job: job})
					return
				}
				f.lease(ctx, i, job, key, d, run)
			})
		}
	}
}

// lease has the far network rent job i: provider i modulo the providers
// takes two of its eight GPUs, the lease signed by both is announced, and
// after run the provider announces the release. Consecutive jobs go to
// consecutive providers, so a pair of GPUs is taken again only after
// four rounds of all the providers.
func (f *far) lease(ctx context.Context, i int, job string, sub crypto.PrivKey, d market.Declaration, run time.Duration) {
	p := i % len(f.providers)
	pair := (i / len(f.providers)) % 4
	prov, id := f.providers[p], f.ids[p].String()
	subID, err := peer.IDFromPrivateKey(sub)
	if err != nil {
		f.failed.Add(1)
		return
	}
	now := time.Now().UnixMilli()
	terms := wire.LeaseTerms{
		ID: wire.LeaseID(job, id, now, uint64(i)), Job: job, Provider: id, Submitter: subID.String(),
		GPUs: []string{f.gpuUUID(p, 2*pair), f.gpuUUID(p, 2*pair+1)},
		CPUs: d.Request.CPUs, MemoryBytes: uint64(d.Request.Memory), Limit: d.Request.Limit,
		Proposed: now, Expires: now + 10_000,
	}
	l := wire.SignedLease{Terms: terms}
	if l.SignProvider(prov) != nil || l.Countersign(sub) != nil {
		f.failed.Add(1)
		return
	}
	f.publish(ctx, prov, wire.KindLease, l)
	if task.Sleep(ctx, run) != nil {
		return
	}
	f.publish(ctx, prov, wire.KindRelease, wire.ReleaseBody{
		Lease: terms.ID, Job: job, Provider: id, Submitter: terms.Submitter, GPUs: terms.GPUs,
		Outcome: ledger.OutcomeCompleted, Attribution: ledger.AttributionJob,
		HeldMs: run.Milliseconds(), At: time.Now().UnixMilli(),
	})
}

// publish seals one jobs-topic message and spreads it.
func (f *far) publish(ctx context.Context, key crypto.PrivKey, kind string, body any) {
	s, err := p2p.Seal(key, kind, body, time.Now())
	if err != nil {
		f.failed.Add(1)
		return
	}
	f.spread(ctx, p2p.TopicJobs, s.Raw)
	f.sent[sentJobs].Add(1)
}
