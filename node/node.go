package node

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"time"

	"github.com/e31network/e31/content"
	"github.com/e31network/e31/ledger"
	"github.com/e31network/e31/node/acl"
	"github.com/e31network/e31/node/compute"
	"github.com/e31network/e31/node/digest"
	"github.com/e31network/e31/node/diskroom"
	"github.com/e31network/e31/node/epoch"
	"github.com/e31network/e31/node/gangnet"
	"github.com/e31network/e31/node/images"
	"github.com/e31network/e31/node/metrics"
	"github.com/e31network/e31/node/offer"
	"github.com/e31network/e31/node/provider"
	"github.com/e31network/e31/node/reach"
	"github.com/e31network/e31/node/state"
	"github.com/e31network/e31/node/submitter"
	"github.com/e31network/e31/node/task"
	"github.com/e31network/e31/node/view"
	"github.com/e31network/e31/node/wire"
	"github.com/e31network/e31/p2p"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/protocol"
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

// Node is a running E31 daemon. It only wires the parts together and runs
// the loops that feed them: gossip in and out, the epoch's Match.
type Node struct {
	// Immutable after New.
	cfg    Config
	log    *slog.Logger
	key    *ledger.SigningKey // what the node signs with; the host has the plain key
	self   peer.ID
	shard  p2p.Shard // the part of the network's market this node takes part in
	host   host.Host
	gossip *p2p.Gossip
	// endLife ends the context the exchange and the gossip run on.
	endLife context.CancelFunc
	// dirLock holds the data dir against a second daemon until the
	// stores are closed; immutable after New.
	dirLock *dataDirLock
	// gangs serves the gang networks of the parts this node runs; nil
	// where it runs no sandbox.
	gangs    *gangnet.Registry
	guard    *p2p.Guard       // gossip peer scores and per-peer rate limits
	digests  *digest.Book     // every shard's latest digest (digest.go)
	compute  *compute.Machine // the GPUs and the sandbox jobs run in
	disk     *diskroom.Room   // the data dir's disk, lent to jobs (disk.go)
	started  time.Time
	offers   *view.Offers
	market   *view.Market
	state    *state.Store
	ledger   *ledger.Ledger
	store    *content.Store
	exchange *content.Exchange
	images   *images.Library
	// raw wires the hostile submitter of Config.RawContent, in a build
	// that has it (rawhooks.go).
	raw rawHooks
	// imagesRun says image jobs can run here: a sandbox that supports
	// them, so the provider takes them and the offer says so.
	imagesRun bool
	access    *acl.List
	provider  *provider.Provider
	submitter *submitter.Submitter
	metrics   *metrics.Registry
	gater     *p2p.Gater
	// relayPeers tells the relay service who belongs to the network;
	// nil unless this node is a relay (Config.RelayService).
	relayPeers *relayPeers

	// handlers are the direct-stream handlers, set in New and never
	// changed after.
	handlers map[protocol.ID]p2p.Handler

	boot    []peer.AddrInfo // bootstrap peers, also the relays of a node behind a NAT
	natOn   bool            // NAT traversal runs (Config.NAT)
	punches *reach.Punches  // the last hole punch with each peer
	// shardMates finds peers of this node's shard, and says which peers
	// are in no market this node takes part in.
	shardMates *reach.ShardMates
	peers      *reach.Book // where peers are, remembered across restarts
	// reach tells the owner how peers reach the node (the log, e31 id).
	reach *reach.Teller

	// delays is the gossip delay this node observed, announced in its
	// offer; clock turns the announcements into each epoch's delay.
	// Both immutable after New (delays locks itself).
	delays *view.GossipDelays
	clock  epoch.Clock

	// The loops that feed the roles: built by wireLoops, immutable after,
	// each run by Run in a goroutine of loops.
	epochs *epoch.Loop      // the epoch's Match
	fast   *epoch.FastPath  // the pass between epochs
	offer  *offer.Publisher // this node's offer
	// follows are the class markets followed for this node's jobs
	// (follow.go); nil where the market is not split by class. Built by
	// wireRoles, its feed set by wireLoops, run by Run.
	follows *follows
	// matches are the last Match results (GET /v1/matches); locks itself.
	matches epoch.History

	loops    task.Group // the node's own loops and short tasks
	inflight task.Group // stream handlers being answered
	// units runs the node's units of work on what peers sent, and its
	// short tasks, in loops; set in New, immutable after.
	units units
	// feed applies the gossip to the views and roles; net answers the
	// API's questions about the network. Both built by wireLoops,
	// immutable after.
	feed *gossipFeed
	net  *networkQueries
}

// New opens the data dir and starts the host, gossip and stores; Run serves.
// On error everything opened so far is closed again.
func New(ctx context.Context, cfg Config) (n *Node, err error) {
	cfg, err = cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	if err := prepareDataDir(cfg.DataDir, cfg.Log); err != nil {
		return nil, err
	}
	key, err := p2p.LoadOrCreateIdentity(cfg.DataDir)
	if err != nil {
		return nil, err
	}
	self, err := peer.IDFromPrivateKey(key)
	if err != nil {
		return nil, err
	}
	signing, err := ledger.NewSigningKey(key)
	if err != nil {
		return nil, fmt.Errorf("identity key %s: %w", filepath.Join(cfg.DataDir, p2p.IdentityFile), err)
	}
	offers := view.NewOffers()
	n = &Node{
		cfg:      cfg,
		log:      cfg.Log,
		key:      signing,
		self:     self,
		shard:    p2p.ShardOf(self, cfg.Shards),
		started:  time.Now(),
		offers:   offers,
		market:   view.NewBoundedMarket(viewBounds(cfg.View, self, offers)),
		access:   acl.New(),
		metrics:  metrics.New(),
		delays:   view.NewGossipDelays(view.DefaultDelayWindow),
		handlers: make(map[protocol.ID]p2p.Handler),
		gater:    p2p.NewGater(),
		punches:  reach.NewPunches(cfg.PunchWait),
		guard:    p2p.NewGuard(p2p.GuardConfig{Declarations: []string{wire.KindDeclaration, wire.KindRequeue}}),
		digests:  digest.NewBook(digest.Timing{Every: cfg.DigestEvery}, nil),
	}
	n.units = units{log: n.log, metrics: n.metrics, loops: &n.loops}
	n.clock = newClock(cfg, n.offers)
	if n.boot, err = p2p.ParseBootstrap(cfg.Bootstrap); err != nil {
		return nil, err
	}
	if n.natOn, err = reach.Traverse(cfg.NAT, cfg.Listen); err != nil {
		return nil, err
	}
	behindNAT := false
	if n.natOn && !cfg.RelayService {
		if behindNAT, err = reach.BehindNAT(cfg.Listen); err != nil {
			return nil, err
		}
	}
	var relay *reach.Relay
	if cfg.RelayService {
		n.relayPeers = newRelayPeers()
		relay = &reach.Relay{Data: cfg.RelayData, CircuitsPerDay: cfg.RelayPerDay, Metrics: n.metrics.Registerer(),
			Peers: n.relayPeers, BudgetPeer: relayBudget(cfg.RelayBudgetPeer, DefaultRelayBudgetPeer),
			BudgetIP: relayBudget(cfg.RelayBudgetIP, DefaultRelayBudgetIP), BudgetWindow: cfg.RelayBudgetWindow,
			Log: n.log, Panicked: n.metrics.Panicked}
	}
	// The exchange and the gossip live as long as the node, not as long
	// as ctx: a stop signal ends ctx before the drain (Run's drainToStop),
	// during which the node must still gossip and serve checkpoints. They
	// end with closeStores.
	life, endLife := context.WithCancel(context.WithoutCancel(ctx))
	n.endLife = endLife
	var closers []func() error
	closers = append(closers, func() error { endLife(); return nil })
	defer func() {
		if err != nil {
			for i := len(closers) - 1; i >= 0; i-- {
				_ = closers[i]()
			}
		}
	}()
	if n.dirLock, err = lockDataDir(cfg.DataDir); err != nil {
		return nil, err
	}
	closers = append(closers, n.dirLock.Release)
	if n.compute, err = compute.Open(ctx, self.String(), compute.Options{DataDir: cfg.DataDir, SimGPUs: cfg.SimGPUs,
		Discover: cfg.DiscoverGPUs, Runtime: cfg.Runtime, Runner: cfg.testRunner, SeeGPUs: cfg.testSeeGPUs, Log: n.log}); err != nil {
		return nil, err
	}
	closers = append(closers, n.compute.Close)
	if err := n.openDisk(); err != nil {
		return nil, err
	}
	if n.state, err = state.Open(filepath.Join(cfg.DataDir, "state"), n.log); err != nil {
		return nil, err
	}
	closers = append(closers, n.state.Close)
	if n.ledger, err = ledger.Open(ctx, filepath.Join(cfg.DataDir, "ledger"), ledger.Options{Log: n.log, Self: self}); err != nil {
		return nil, err
	}
	closers = append(closers, n.ledger.Close)
	if n.store, err = content.Open(ctx, filepath.Join(cfg.DataDir, "blocks"), content.StoreOptions{Log: n.log, Room: n.disk.ContentRoom}); err != nil {
		return nil, err
	}
	closers = append(closers, n.store.Close)
	if n.images, err = images.Open(ctx, n.store, filepath.Join(cfg.DataDir, "layers"), images.Options{
		CacheBytes: cfg.ImageCacheBytes, MaxImportBytes: cfg.MaxInputBytes, Log: n.log,
		MaxLayerBytes: cfg.MaxLayerBytes, MaxLayerEntries: cfg.MaxEntries,
	}); err != nil {
		return nil, err
	}
	closers = append(closers, n.images.Close)
	n.imagesRun = n.compute.RunsImages(compute.ImageSettings{CacheBytes: cfg.ImageCacheBytes, Pull: cfg.ImagePull, RequireImage: cfg.RequireImage})
	if n.host, err = p2p.NewHost(p2p.HostConfig{Key: key, Listen: cfg.Listen, UserAgent: "e31d/" + Version, Gater: n.gater,
		Reachability: reach.Reachability(n.natOn, behindNAT, relay, n.boot, n.punches)}); err != nil {
		return nil, err
	}
	closers = append(closers, n.host.Close)
	n.peers = &reach.Book{Host: n.host, Self: self, Records: n.state, ConnectTimeout: cfg.ConnectTimeout, Log: n.log, Go: n.units.goTask}
	if n.natOn {
		n.peers.Relays = n.boot
	}
	n.reach = &reach.Teller{Host: n.host, On: n.natOn, Boot: n.boot, Log: n.log}
	if n.exchange, err = content.NewExchange(life, n.host, n.store, n.access, content.ExchangeOptions{
		Log: n.log, StallTimeout: cfg.StallTimeout, UploadLimit: cfg.UploadLimit, Served: n.countServed,
		Panicked: n.metrics.Panicked,
	}); err != nil {
		return nil, err
	}
	closers = append(closers, n.exchange.Close)
	if cfg.Shard != nil {
		n.shard.Index = *cfg.Shard
	}
	if cfg.Market == MarketClasses {
		n.shard = classShardOf(cfg, self, machineGPUs(n.compute))
	}
	if !n.shard.Whole() {
		n.log.Info("taking part in one shard of the network's market", "shard", n.shard.String(), "network", cfg.Network)
	}
	n.gossip, err = p2p.NewGossip(life, n.host, n.key, p2p.GossipConfig{
		Network:  cfg.Network,
		Shard:    n.shard,
		Log:      n.log,
		Guard:    n.guard,
		Panicked: n.metrics.Panicked,
		Accepted: n.relayPeers.hook(),
		Validators: map[string]p2p.BodyValidator{
			p2p.TopicOffers: wire.OfferValidator(n.shard),
			p2p.TopicJobs:   view.NewJobChecks(n.market).In(n.shard).Validate,
			p2p.TopicDigest: n.digestValidator().Validate,
		},
	})
	if err != nil {
		return nil, err
	}
	n.shardMates = &reach.ShardMates{Host: n.host, Network: cfg.Network, Shard: n.shard, ConnectTimeout: cfg.ConnectTimeout, Log: n.log,
		InShard: func() int { return len(n.gossip.TopicPeers(p2p.TopicOffers)) }}
	n.shardMates.Mark()
	n.handlers[wire.ProtoShardPeers] = n.shardMates.Answer
	if n.compute.Runner != nil {
		// A sandbox here can run a gang's part, in a private network
		// over this host.
		n.gangs = gangnet.NewRegistry(n.host, n.log)
		closers = append(closers, n.gangs.Close)
	}
	n.raw = rawHooks{on: cfg.RawContent, store: n.store, images: n.images, log: n.log}
	n.wireRoles()
	n.wireLoops()
	n.metrics.Register(metrics.Sources{Provider: n.provider, Submitter: n.submitter, Images: n.images, Gossip: n.gossip, Guard: n.guard, View: n.market})
	if err := n.submitter.Recover(); err != nil {
		return nil, fmt.Errorf("load jobs: %w", err)
	}
	if err := n.provider.Recover(ctx); err != nil {
		return nil, fmt.Errorf("load leases: %w", err)
	}
	return n, nil
}

// PeerID is the node's peer ID.
func (n *Node) PeerID() peer.ID { return n.self }

// Addrs are the node's listen addresses with its peer ID appended.
func (n *Node) Addrs() []string {
	var out []string
	for _, a := range n.host.Addrs() {
		out = append(out, a.String()+"/p2p/"+n.self.String())
	}
	return out
}
