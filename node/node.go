package node

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/e31network/e31/content"
	"github.com/e31network/e31/exec"
	"github.com/e31network/e31/ledger"
	"github.com/e31network/e31/market"
	"github.com/e31network/e31/node/api"
	"github.com/e31network/e31/p2p"
	"github.com/ipfs/go-cid"
	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/protocol"
	ma "github.com/multiformats/go-multiaddr"
)

// Version is the daemon's version string.
const Version = "0.1.0"

// RunFile is written into the data dir once the node is ready, and removed
// on a clean stop: how scripts and the testnet find a node's addresses.
const RunFile = "run.json"

// RunInfo is the content of RunFile.
type RunInfo struct {
	PeerID string   `json:"peer_id"`
	API    string   `json:"api"`
	Addrs  []string `json:"addrs"`
	PID    int      `json:"pid"`
}

// Node is a running E31 daemon.
type Node struct {
	// Immutable after New.
	cfg      Config
	log      *slog.Logger
	key      crypto.PrivKey
	self     peer.ID
	host     host.Host
	gossip   *p2p.Gossip
	gpus     []exec.GPU
	started  time.Time
	offers   *offerView
	view     *marketView
	state    *stateStore
	ledger   *ledger.Ledger
	store    *content.Store
	exchange *content.Exchange
	runner   *exec.Runner // nil: no OCI runtime, so no compute offered
	metrics  *metrics
	gater    *p2p.Gater

	// runCtx lives as long as Run; leases and transfers hang off it.
	runCtx context.Context

	offerChanged chan struct{} // a signal to publish the offer now

	mu        sync.Mutex                  // guards the fields below
	jobs      map[string]*jobRecord       // jobs this node submitted
	leases    map[string]*activeLease     // leases this node provides, not yet released
	held      map[string]string           // GPU UUID -> lease ID, or "proposal:<job>"
	proposing map[string]bool             // jobs with a proposal of ours in flight
	access    map[string]map[peer.ID]bool // root CID -> peers that may fetch it
	matches   []api.Match                 // the last Match results, oldest first
	withdrawn map[string]withdrawal       // job -> who withdrew it and when, as a provider saw it
	joined    time.Time                   // when the first offer of another provider arrived

	// handlers are the direct-stream handlers, set in Run before any loop
	// starts and never changed after.
	handlers map[protocol.ID]p2p.Handler

	wg sync.WaitGroup // background loops and lease goroutines
}

// New opens the data dir and starts the host, gossip and stores; Run serves.
// On error everything opened so far is closed again.
func New(ctx context.Context, cfg Config) (n *Node, err error) {
	cfg, err = cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(cfg.DataDir, 0o700); err != nil {
		return nil, fmt.Errorf("create data dir: %w", err)
	}
	key, err := p2p.LoadOrCreateIdentity(cfg.DataDir)
	if err != nil {
		return nil, err
	}
	self, err := peer.IDFromPrivateKey(key)
	if err != nil {
		return nil, err
	}
	n = &Node{
		cfg:          cfg,
		log:          cfg.Log,
		key:          key,
		self:         self,
		started:      time.Now(),
		offers:       newOfferView(),
		view:         newMarketView(),
		metrics:      newMetrics(),
		runCtx:       ctx,
		offerChanged: make(chan struct{}, 1),
		jobs:         make(map[string]*jobRecord),
		leases:       make(map[string]*activeLease),
		held:         make(map[string]string),
		proposing:    make(map[string]bool),
		access:       make(map[string]map[peer.ID]bool),
		handlers:     make(map[protocol.ID]p2p.Handler),
		gater:        p2p.NewGater(),
		withdrawn:    make(map[string]withdrawal),
	}
	var closers []func() error
	defer func() {
		if err != nil {
			for i := len(closers) - 1; i >= 0; i-- {
				_ = closers[i]()
			}
		}
	}()
	if cfg.SimGPUs != "" {
		n.gpus, err = exec.ParseSimSpec(cfg.SimGPUs, self.String())
		if err != nil {
			return nil, fmt.Errorf("--sim-gpus: %w", err)
		}
	} else {
		n.gpus = exec.Discover(ctx, n.log)
	}
	if len(n.gpus) > 0 {
		n.runner, err = exec.NewRunner(ctx, exec.RunnerOptions{Runtime: cfg.Runtime, StateRoot: filepath.Join(cfg.DataDir, "runtime"), Log: n.log})
		if err != nil {
			// Without a working sandbox the node still submits, fetches
			// and verifies; it only offers no compute.
			hint := "install one with: apt-get install -y runc"
			if !errors.Is(err, exec.ErrNoRuntime) {
				hint = "the runtime failed its probe; check it, or pick another with --runtime"
			}
			n.log.Warn("no working OCI runtime: this node offers no compute but can still submit jobs; "+hint, "err", err)
			n.runner, err = nil, nil
		}
	}
	if n.state, err = openState(filepath.Join(cfg.DataDir, "state"), n.log); err != nil {
		return nil, err
	}
	closers = append(closers, n.state.close)
	if n.ledger, err = ledger.Open(ctx, filepath.Join(cfg.DataDir, "ledger"), ledger.Options{Log: n.log, Self: self}); err != nil {
		return nil, err
	}
	closers = append(closers, n.ledger.Close)
	if n.store, err = content.Open(ctx, filepath.Join(cfg.DataDir, "blocks"), content.StoreOptions{Log: n.log}); err != nil {
		return nil, err
	}
	closers = append(closers, n.store.Close)
	if n.host, err = p2p.NewHost(p2p.HostConfig{Key: key, Listen: cfg.Listen, UserAgent: "e31d/" + Version, Gater: n.gater}); err != nil {
		return nil, err
	}
	closers = append(closers, n.host.Close)
	if n.exchange, err = content.NewExchange(ctx, n.host, n.store, content.AccessFunc(n.allowed), content.ExchangeOptions{Log: n.log, StallTimeout: cfg.StallTimeout}); err != nil {
		return nil, err
	}
	closers = append(closers, n.exchange.Close)
	n.gossip, err = p2p.NewGossip(ctx, n.host, key, p2p.GossipConfig{
		Network: cfg.Network,
		Log:     n.log,
		Validators: map[string]p2p.BodyValidator{
			p2p.TopicOffers: validateOffer,
			p2p.TopicJobs:   n.validateJobMessage,
		},
	})
	if err != nil {
		return nil, err
	}
	n.metrics.register(n)
	if err := n.recover(ctx); err != nil {
		return nil, err
	}
	return n, nil
}

// allowed answers the content exchange: may p fetch root?
func (n *Node) allowed(p peer.ID, root cid.Cid) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.access[root.String()][p]
}

// allow lets p fetch root.
func (n *Node) allow(p peer.ID, root cid.Cid) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.allowLocked(p, root)
}

func (n *Node) allowLocked(p peer.ID, root cid.Cid) {
	m := n.access[root.String()]
	if m == nil {
		m = make(map[peer.ID]bool)
		n.access[root.String()] = m
	}
	m[p] = true
}

// withdrawal is a job's withdrawal as a provider saw it.
type withdrawal struct {
	by string
	at time.Time
}

// ID is the node's peer ID.
func (n *Node) ID() peer.ID { return n.self }

// Host is the node's libp2p host.
func (n *Node) Host() host.Host { return n.host }

// Addrs are the node's listen addresses with its peer ID appended.
func (n *Node) Addrs() []string {
	var out []string
	for _, a := range n.host.Addrs() {
		out = append(out, a.String()+"/p2p/"+n.self.String())
	}
	return out
}

// Run serves until ctx is cancelled, then stops everything it started.
func (n *Node) Run(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	n.runCtx = ctx
	defer n.close()

	boot, err := p2p.ParseBootstrap(n.cfg.Bootstrap)
	if err != nil {
		return err
	}
	n.redialKnownPeers(ctx)
	b := p2p.StartBootstrap(ctx, n.host, boot, n.log)
	// Whatever way Run returns, every loop stops before the stores close
	// (deferred calls run last first: this one runs before n.close).
	defer func() {
		cancel()
		// No new stream may start work the wait below would miss.
		for proto := range n.handlers {
			n.host.RemoveStreamHandler(proto)
		}
		n.wg.Wait()
		b.Wait()
	}()
	if n.cfg.MDNS {
		closeMDNS, err := p2p.StartMDNS(ctx, n.host, n.cfg.Network, n.log)
		if err != nil {
			return fmt.Errorf("start mdns: %w", err)
		}
		defer closeMDNS()
	}

	offersSub, err := n.gossip.Subscribe(p2p.TopicOffers)
	if err != nil {
		return err
	}
	defer offersSub.Cancel()
	jobsSub, err := n.gossip.Subscribe(p2p.TopicJobs)
	if err != nil {
		return err
	}
	defer jobsSub.Cancel()

	n.serve(ctx, protoLease, n.cfg.ProposalTTL, n.handleProposal)
	n.serve(ctx, protoEvent, 30*time.Second, n.handleEvent)
	n.serve(ctx, protoOutput, n.cfg.OutputTimeout, n.handleOutput)
	n.serve(ctx, protoReceipt, 30*time.Second, n.handleReceipt)
	n.serve(ctx, protoWithdraw, 30*time.Second, n.handleWithdraw)

	srv, err := n.serveAPI(ctx)
	if err != nil {
		return err
	}
	defer srv.close()
	if n.cfg.Metrics != "" {
		stop, err := n.metrics.serve(ctx, n.cfg.Metrics)
		if err != nil {
			return fmt.Errorf("metrics on %s: %w", n.cfg.Metrics, err)
		}
		defer stop()
	}

	n.goLoop(ctx, "offers in", func(ctx context.Context) { n.receiveOffers(ctx, offersSub) })
	n.goLoop(ctx, "offers out", n.publishOffers)
	n.goLoop(ctx, "offers expiry", n.expireOffers)
	n.goLoop(ctx, "jobs in", func(ctx context.Context) { n.receiveJobs(ctx, jobsSub) })
	n.goLoop(ctx, "match", n.matchLoop)
	n.goLoop(ctx, "resume", n.resumeAfterRestart)
	n.goLoop(ctx, "providers", n.watchProviders)
	n.goLoop(ctx, "requeue", n.requeueLoop)

	if err := n.writeRunFile(srv.addr); err != nil {
		return err
	}
	defer os.Remove(filepath.Join(n.cfg.DataDir, RunFile))
	n.log.Info("e31d ready", "peer_id", n.self, "api", srv.addr, "addrs", n.Addrs(), "gpus", len(n.gpus), "compute", n.runner != nil, "network", n.cfg.Network)

	<-ctx.Done()
	n.log.Info("e31d stopping")
	return nil
}

// close releases the stores and the host, in reverse order of opening.
func (n *Node) close() {
	_ = n.exchange.Close()
	_ = n.host.Close()
	_ = n.store.Close()
	_ = n.ledger.Close()
	_ = n.state.close()
}

func (n *Node) goLoop(ctx context.Context, name string, fn func(ctx context.Context)) {
	n.wg.Add(1)
	go func() {
		defer n.wg.Done()
		fn(ctx)
		n.log.Debug("loop stopped", "loop", name)
	}()
}

func (n *Node) writeRunFile(api string) error {
	info := RunInfo{PeerID: n.self.String(), API: api, Addrs: n.Addrs(), PID: os.Getpid()}
	b, err := json.MarshalIndent(info, "", "  ")
	if err != nil {
		return err
	}
	path := filepath.Join(n.cfg.DataDir, RunFile)
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return fmt.Errorf("write run file: %w", err)
	}
	return os.Rename(tmp, path)
}

// ownOffer is the offer this node publishes.
func (n *Node) ownOffer() market.Offer {
	o := market.Offer{Provider: n.self.String(), CPUs: n.cfg.CPUs, MemoryBytes: n.cfg.MemoryBytes}
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, g := range n.gpus {
		o.GPUs = append(o.GPUs, market.GPU{Index: g.Index, UUID: g.UUID, Model: g.Model, MemoryBytes: g.MemoryBytes, Free: isFree(n.held[g.UUID])})
	}
	return o
}

// isFree says whether a GPU with this hold is free in the offer. A GPU held
// for a proposal in flight still shows free: only a signed lease changes the
// offer, so that every peer's view changes once, with the lease.
func isFree(hold string) bool { return hold == "" || strings.HasPrefix(hold, "proposal:") }

// publishOffers publishes the node's offer at start, whenever it changes and
// every heartbeat. A node with no GPUs, or no runtime to run jobs in, offers
// nothing.
func (n *Node) publishOffers(ctx context.Context) {
	if len(n.gpus) == 0 || n.runner == nil {
		return
	}
	t := time.NewTicker(n.cfg.Heartbeat)
	defer t.Stop()
	for {
		body := offerBody{
			Offer:       n.ownOffer(),
			Addrs:       n.Addrs(),
			HeartbeatMs: n.cfg.Heartbeat.Milliseconds(),
		}
		if _, err := n.gossip.Publish(ctx, p2p.TopicOffers, kindOffer, body); err != nil && ctx.Err() == nil {
			n.log.Warn("publish offer", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-n.offerChanged:
		}
	}
}

// receiveOffers applies every accepted offer to the view.
func (n *Node) receiveOffers(ctx context.Context, sub *p2p.Subscription) {
	for {
		s, err := sub.Next(ctx)
		if err != nil {
			return
		}
		var b offerBody
		if err := s.Decode(&b); err != nil {
			continue // the validator already checked it; cannot happen
		}
		now := time.Now()
		if isNew := n.offers.apply(b, s.Message.Time, now); isNew {
			n.log.Info("provider joined the view", "provider", b.Offer.Provider, "gpus", len(b.Offer.GPUs))
			n.learnAddrs(ctx, s.Signer, b.Addrs)
			if s.Signer != n.self {
				n.rememberPeer(s.Signer, b.Addrs)
				n.mu.Lock()
				if n.joined.IsZero() {
					n.joined = now
				}
				n.mu.Unlock()
			}
		}
	}
}

// learnAddrs keeps a provider's addresses so that a direct stream can reach
// it, and connects to it so that gossip does not hang on the bootstrap peers
// alone.
func (n *Node) learnAddrs(ctx context.Context, p peer.ID, addrs []string) {
	if p == n.self {
		return
	}
	info, ok := addrInfo(p, addrs)
	if !ok {
		return
	}
	n.host.Peerstore().AddAddrs(p, info.Addrs, peerAddrTTL)
	if len(n.host.Network().Peers()) >= maxDialedPeers {
		return
	}
	n.wg.Add(1)
	go func() {
		defer n.wg.Done()
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		if err := n.host.Connect(cctx, info); err != nil && ctx.Err() == nil {
			n.log.Debug("connect to provider", "peer", p, "err", err)
		}
	}()
}

// peerAddrTTL is how long learned addresses are kept.
const peerAddrTTL = time.Hour

// addrInfo parses the /p2p/ multiaddrs a peer published about itself,
// keeping only those that name it.
func addrInfo(p peer.ID, addrs []string) (peer.AddrInfo, bool) {
	info := peer.AddrInfo{ID: p}
	for _, a := range addrs {
		m, err := ma.NewMultiaddr(a)
		if err != nil {
			continue
		}
		if ai, err := peer.AddrInfoFromP2pAddr(m); err == nil && ai.ID == p {
			info.Addrs = append(info.Addrs, ai.Addrs...)
		}
	}
	return info, len(info.Addrs) > 0
}

// maxDialedPeers caps the connections a node opens on its own to providers it
// learns of; beyond it gossip's mesh is already well connected.
const maxDialedPeers = 32

// expireOffers drops providers that missed their heartbeats.
func (n *Node) expireOffers(ctx context.Context) {
	t := time.NewTicker(max(n.cfg.Heartbeat/2, 50*time.Millisecond))
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			for _, p := range n.offers.expire(now) {
				n.log.Info("provider left the view", "provider", p, "reason", "missed heartbeats")
			}
		}
	}
}

// errNotFound marks API lookups of things that do not exist.
var errNotFound = errors.New("not found")
