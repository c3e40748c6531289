package rogue

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/e31network/e31/content"
	"github.com/e31network/e31/node/task"
	"github.com/e31network/e31/node/wire"
	"github.com/e31network/e31/p2p"
	"github.com/ipfs/go-cid"
	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/protocol"
)

// Config configures New. The timings are the network's, as its daemons'
// flags set them: a rogue that proposes, heartbeats and signs receipts on
// the network's own schedule is told apart by what it says, not by when.
type Config struct {
	// Network names the E31 network to join; default "testnet".
	Network string
	// Shard is the part of the network's market whose topics the rogue
	// joins; zero: the whole network's. A class market's, say, to offer
	// there what is not of its class.
	Shard p2p.Shard
	// Listen is the host's listen address; default a free TCP port on
	// 127.0.0.1.
	Listen string
	// Dir holds the content store; empty keeps it in memory.
	Dir string
	// Epoch is the network's epoch (e31d --epoch), which a proposal's
	// epoch number counts in; default 1s.
	Epoch time.Duration
	// ProposalTTL is how far ahead of its time a proposal expires
	// (e31d --proposal-ttl); default 10s.
	ProposalTTL time.Duration
	// ReceiptInterval is how often a lease's honest interim receipts go
	// (e31d --receipt-interval; KeepAlive); default 1s.
	ReceiptInterval time.Duration
	// Heartbeat is how often the offer is published again; default 500ms.
	Heartbeat time.Duration
	// Unbounded proposes terms without the held-time rule
	// (wire.LeaseTerms.Bound), as providers did before it: daemons from
	// before the rule refuse terms that carry it, those after it terms
	// that do not.
	Unbounded bool
	// Relays are the relays the rogue may reserve slots on and open
	// circuits through (circuit relay v2), as multiaddrs ending in
	// /p2p/ID; none: the relay transport is off, as on the testnet's
	// daemons.
	Relays []string
	// Log receives what the rogue does; nil discards it.
	Log *slog.Logger
}

func (c Config) withDefaults() Config {
	if c.Network == "" {
		c.Network = "testnet"
	}
	if c.Listen == "" {
		c.Listen = "/ip4/127.0.0.1/tcp/0"
	}
	if c.Epoch <= 0 {
		c.Epoch = time.Second
	}
	if c.ProposalTTL <= 0 {
		c.ProposalTTL = 10 * time.Second
	}
	if c.ReceiptInterval <= 0 {
		c.ReceiptInterval = time.Second
	}
	if c.Heartbeat <= 0 {
		c.Heartbeat = 500 * time.Millisecond
	}
	if c.Log == nil {
		c.Log = slog.New(slog.DiscardHandler)
	}
	return c
}

// callTimeout bounds one request the rogue makes; an honest submitter may
// hold a receipt for ten seconds while it pulls a checkpoint.
const callTimeout = 30 * time.Second

// Rogue is the cheating peer. Its methods may be called from any
// goroutine; attacks on different leases may run at once.
type Rogue struct {
	// Immutable after New.
	cfg    Config
	key    crypto.PrivKey
	self   peer.ID
	h      host.Host
	gossip *p2p.Gossip
	store  *content.Store
	ex     *content.Exchange
	ctx    context.Context // ends at Close
	cancel context.CancelFunc
	wg     sync.WaitGroup // the goroutines that end with ctx

	// mu guards the fields below. A state lock: never held across a
	// network call, a publish or a store write.
	mu sync.Mutex
	// seen is what the jobs topic said (watch.go).
	seen jobsSeen
	// offer is the offer published every heartbeat; nil: none.
	offer *offered
	// sub is how the rogue answers as a submitter (submitter.go); nil
	// until Serve.
	sub *submitting
	// gangCalls counts the gang-lease requests received, by lease; a
	// rogue provider never answers them (SquatGangPart).
	gangCalls map[string]int
	// withdrawn notes the jobs their submitter withdrew from the rogue.
	withdrawn map[string]bool
	// served counts the bytes served over the bulk protocol, by peer.
	served map[peer.ID]int64
	// sunk counts the bytes read on the sink protocol, by peer (relay.go).
	sunk map[peer.ID]int64
	// sinks counts the sink streams still open.
	sinks int
}

// New starts a rogue peer, subscribed to the network's topics but
// connected to nobody yet.
func New(ctx context.Context, cfg Config) (*Rogue, error) {
	cfg = cfg.withDefaults()
	key, _, err := crypto.GenerateEd25519Key(rand.Reader)
	if err != nil {
		return nil, err
	}
	self, err := peer.IDFromPrivateKey(key)
	if err != nil {
		return nil, err
	}
	reach, err := relayClient(cfg.Relays)
	if err != nil {
		return nil, err
	}
	h, err := p2p.NewHost(p2p.HostConfig{Key: key, Listen: []string{cfg.Listen}, UserAgent: "e31-rogue", Reachability: reach})
	if err != nil {
		return nil, err
	}
	rctx, cancel := context.WithCancel(ctx)
	r := &Rogue{cfg: cfg, key: key, self: self, h: h, ctx: rctx, cancel: cancel,
		seen: newJobsSeen(), gangCalls: map[string]int{}, withdrawn: map[string]bool{}, served: map[peer.ID]int64{}, sunk: map[peer.ID]int64{}}
	fail := func(err error) (*Rogue, error) {
		r.Close()
		return nil, err
	}
	// No validators: the rogue publishes what the network's would refuse
	// (an offer whose GPU model is a terminal escape), and reads the
	// topics itself.
	r.gossip, err = p2p.NewGossip(rctx, h, key, p2p.GossipConfig{Network: cfg.Network, Shard: cfg.Shard, Log: cfg.Log})
	if err != nil {
		return fail(fmt.Errorf("rogue: gossip: %w", err))
	}
	r.store, err = content.Open(rctx, cfg.Dir, content.StoreOptions{InMemory: cfg.Dir == "", Log: cfg.Log})
	if err != nil {
		return fail(fmt.Errorf("rogue: content store: %w", err))
	}
	// Everything it holds, to anyone: a rogue has no jobs to keep private,
	// only DAGs it wants fetched.
	r.ex, err = content.NewExchange(rctx, h, r.store, content.AccessFunc(func(peer.ID, cid.Cid) bool { return true }), content.ExchangeOptions{Log: cfg.Log, Served: r.countServed})
	if err != nil {
		return fail(fmt.Errorf("rogue: exchange: %w", err))
	}
	for _, topic := range []string{p2p.TopicJobs, p2p.TopicOffers} {
		sub, err := r.gossip.Subscribe(topic)
		if err != nil {
			return fail(fmt.Errorf("rogue: subscribe %s: %w", topic, err))
		}
		r.wg.Go(func() {
			defer sub.Cancel()
			r.watch(rctx, sub)
		})
	}
	r.serveProvider()
	r.serveSink()
	return r, nil
}

// ID is the rogue's peer ID.
func (r *Rogue) ID() peer.ID { return r.self }

// Addrs are the rogue's addresses, each ending in /p2p/ID, as a daemon
// puts its own in an offer or a declaration.
func (r *Rogue) Addrs() []string {
	var out []string
	for _, a := range r.h.Addrs() {
		out = append(out, a.String()+"/p2p/"+r.self.String())
	}
	return out
}

// Connect dials peers given as multiaddrs ending in /p2p/ID: every daemon
// of the network, so that a submitter's calls and pulls find the rogue
// connected, as they would find any provider in their view.
func (r *Rogue) Connect(ctx context.Context, addrs ...string) error {
	if err := p2p.Dial(ctx, r.h, addrs...); err != nil {
		return fmt.Errorf("rogue: %w", err)
	}
	return nil
}

// Joined waits until the rogue has at least one peer on both topics, so
// that what it publishes reaches the network.
func (r *Rogue) Joined(ctx context.Context) error {
	for {
		if len(r.gossip.TopicPeers(p2p.TopicJobs)) > 0 && len(r.gossip.TopicPeers(p2p.TopicOffers)) > 0 {
			return nil
		}
		if err := task.Sleep(ctx, 10*time.Millisecond); err != nil {
			return fmt.Errorf("rogue: no gossip peers: %w", err)
		}
	}
}

// Close stops the rogue: its goroutines, exchange, store and host.
func (r *Rogue) Close() error {
	r.cancel()
	if r.ex != nil {
		r.ex.Close()
	}
	err := r.h.Close()
	r.wg.Wait()
	if r.store != nil {
		err = errors.Join(err, r.store.Close())
	}
	return err
}

// call makes one request of peer p and decodes its reply into resp,
// bounded by callTimeout.
func (r *Rogue) call(ctx context.Context, p peer.ID, proto protocol.ID, req, resp any) error {
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	return p2p.Call(ctx, r.h, p, proto, req, resp)
}

// countServed counts bytes served over the bulk protocol.
func (r *Rogue) countServed(to peer.ID, n int64) {
	r.mu.Lock()
	r.served[to] += n
	r.mu.Unlock()
}

// Served is how many bytes the rogue served p over the bulk protocol.
func (r *Rogue) Served(p peer.ID) int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.served[p]
}

// handleWithdraw notes a submitter's withdrawal of a job.
func (r *Rogue) handleWithdraw(_ context.Context, _ peer.ID, raw json.RawMessage) (any, error) {
	var req wire.WithdrawRequest
	if err := p2p.DecodeStrict(raw, &req); err != nil {
		return nil, err
	}
	r.mu.Lock()
	r.withdrawn[req.Job] = true
	r.mu.Unlock()
	return struct{}{}, nil
}

// GangCalls is how many times a submitter asked the rogue to sign the
// gang lease of lease.
func (r *Rogue) GangCalls(lease string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.gangCalls[lease]
}

// serveProvider installs what a provider answers: a submitter's
// withdrawal, noted; a gang lease to sign, never answered (the rogue
// squats: SquatGangPart).
func (r *Rogue) serveProvider() {
	p2p.Serve(r.ctx, r.h, wire.ProtoWithdraw, 10*time.Second, r.cfg.Log, r.handleWithdraw)
	r.h.SetStreamHandler(wire.ProtoGang, func(s network.Stream) {
		// Read the request, note it, and say nothing until the caller
		// gives up: the submitter waits out its own timeout, as for a
		// provider that went quiet, rather than hear a refusal it could
		// act on.
		var req wire.GangRequest
		if err := p2p.ReadFrame(s, &req); err == nil {
			r.mu.Lock()
			r.gangCalls[req.Lease]++
			r.mu.Unlock()
		}
		select {
		case <-r.ctx.Done():
		case <-time.After(time.Minute):
		}
		s.Reset()
	})
}
