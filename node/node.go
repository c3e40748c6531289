package node

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/e31network/e31/content"
	"github.com/e31network/e31/exec"
	"github.com/e31network/e31/ledger"
	"github.com/e31network/e31/node/acl"
	"github.com/e31network/e31/node/api"
	"github.com/e31network/e31/node/apiserver"
	"github.com/e31network/e31/node/images"
	"github.com/e31network/e31/node/provider"
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
	cfg      Config
	log      *slog.Logger
	key      *ledger.SigningKey // what the node signs with; the host has the plain key
	self     peer.ID
	host     host.Host
	gossip   *p2p.Gossip
	guard    *p2p.Guard // gossip peer scores and per-peer rate limits
	gpus     []exec.GPU
	started  time.Time
	offers   *view.Offers
	market   *view.Market
	state    *state.Store
	ledger   *ledger.Ledger
	store    *content.Store
	exchange *content.Exchange
	images   *images.Library
	// imagesRun says image jobs can run here: a sandbox that supports
	// them, so the provider takes them and the offer says so.
	imagesRun bool
	runner    provider.Runner // nil: no OCI runtime, so no compute offered
	runDir    string          // the sandbox's run directory (exec.RunDir); "" without one
	runtime   string          // the OCI runtime's path, for GET /v1/id
	access    *acl.List
	provider  *provider.Provider
	submitter *submitter.Submitter
	metrics   *metrics
	gater     *p2p.Gater
	// handlers are the direct-stream handlers, set in New and never
	// changed after.
	handlers map[protocol.ID]p2p.Handler

	boot    []peer.AddrInfo // bootstrap peers, also the relays of a node behind a NAT
	natOn   bool            // NAT traversal runs (Config.NAT)
	punches *punchLog       // the last hole punch with each peer

	// delays is the gossip delay this node observed, announced in its
	// offer; delayRule turns the announcements into each epoch's delay.
	// Both immutable after New (delays locks itself).
	delays    *view.GossipDelays
	delayRule view.DelayRule

	offerChanged chan struct{} // a signal to publish the offer now
	work         chan struct{} // a signal that a job or free GPUs arrived: try the fast path
	loops        task.Group    // the node's own loops
	inflight     task.Group    // stream handlers being answered

	mu      sync.Mutex  // guards matches
	matches []api.Match // the last Match results, oldest first
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
	signing, err := ledger.NewSigningKey(key)
	if err != nil {
		return nil, fmt.Errorf("identity key %s: %w", filepath.Join(cfg.DataDir, p2p.IdentityFile), err)
	}
	n = &Node{
		cfg:          cfg,
		log:          cfg.Log,
		key:          signing,
		self:         self,
		started:      time.Now(),
		offers:       view.NewOffers(),
		market:       view.NewMarket(),
		access:       acl.New(),
		metrics:      newMetrics(),
		offerChanged: make(chan struct{}, 1),
		delays:       view.NewGossipDelays(view.DefaultDelayWindow),
		delayRule:    view.DefaultDelayRule(cfg.Epoch),
		work:         make(chan struct{}, 1),
		handlers:     make(map[protocol.ID]p2p.Handler),
		gater:        p2p.NewGater(),
		punches:      newPunchLog(),
		guard:        p2p.NewGuard(p2p.GuardConfig{Declarations: []string{wire.KindDeclaration, wire.KindRequeue}}),
	}
	if n.boot, err = p2p.ParseBootstrap(cfg.Bootstrap); err != nil {
		return nil, err
	}
	if n.natOn, err = natOn(cfg.NAT, cfg.Listen); err != nil {
		return nil, err
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
	} else if cfg.DiscoverGPUs != nil {
		n.gpus = cfg.DiscoverGPUs(ctx, n.log)
	} else {
		n.log.Info("no GPUs: this program does not look for real ones (use --sim-gpus for simulated GPUs)")
	}
	switch {
	case len(n.gpus) == 0:
	case cfg.testRunner != nil:
		n.runner, n.runtime = cfg.testRunner, "test"
	default:
		runDir, err := exec.RunDir(cfg.DataDir)
		switch {
		case runDir == "":
			runDir = filepath.Join(cfg.DataDir, "run")
			n.log.Warn("no run directory for the sandbox under /run: using "+runDir, "err", err)
		case err != nil:
			n.log.Warn("the sandbox's run directory is on a disk: each job's start costs more CPU", "err", err)
		}
		n.runDir = runDir
		closers = append(closers, func() error { return exec.RemoveRunDir(runDir) })
		stateRoot, bundleRoot := exec.RunDirRoots(runDir)
		r, err := exec.NewRunner(ctx, exec.RunnerOptions{Runtime: cfg.Runtime, Log: n.log,
			StateRoot: stateRoot, BundleRoot: bundleRoot})
		if err == nil {
			n.runner, n.runtime = r, r.Runtime()
			break
		}
		// Without a working sandbox the node still submits, fetches and
		// verifies; it only offers no compute.
		hint := "install one with: apt-get install -y runc"
		if !errors.Is(err, exec.ErrNoRuntime) {
			hint = "the runtime failed its probe; check it, or pick another with --runtime"
		}
		n.log.Warn("no working OCI runtime: this node offers no compute but can still submit jobs; "+hint, "err", err)
	}
	if n.state, err = state.Open(filepath.Join(cfg.DataDir, "state"), n.log); err != nil {
		return nil, err
	}
	closers = append(closers, n.state.Close)
	if n.ledger, err = ledger.Open(ctx, filepath.Join(cfg.DataDir, "ledger"), ledger.Options{Log: n.log, Self: self}); err != nil {
		return nil, err
	}
	closers = append(closers, n.ledger.Close)
	if n.store, err = content.Open(ctx, filepath.Join(cfg.DataDir, "blocks"), content.StoreOptions{Log: n.log}); err != nil {
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
	n.imagesRun = n.logImageSupport()
	if n.host, err = p2p.NewHost(p2p.HostConfig{Key: key, Listen: cfg.Listen, UserAgent: "e31d/" + Version, Gater: n.gater,
		Reachability: reachability(n.natOn, cfg.RelayService, n.boot, n.punches)}); err != nil {
		return nil, err
	}
	closers = append(closers, n.host.Close)
	if n.exchange, err = content.NewExchange(ctx, n.host, n.store, n.access, content.ExchangeOptions{
		Log: n.log, StallTimeout: cfg.StallTimeout, UploadLimit: cfg.UploadLimit, Served: n.countServed,
		Panicked: n.metrics.panicked,
	}); err != nil {
		return nil, err
	}
	closers = append(closers, n.exchange.Close)
	n.gossip, err = p2p.NewGossip(ctx, n.host, n.key, p2p.GossipConfig{
		Network:  cfg.Network,
		Log:      n.log,
		Guard:    n.guard,
		Panicked: n.metrics.panicked,
		Validators: map[string]p2p.BodyValidator{
			p2p.TopicOffers: wire.ValidateOffer,
			p2p.TopicJobs:   n.market.ValidateJobMessage,
		},
	})
	if err != nil {
		return nil, err
	}
	n.wireRoles()
	n.metrics.register(n)
	if err := n.submitter.Recover(); err != nil {
		return nil, fmt.Errorf("load jobs: %w", err)
	}
	if err := n.provider.Recover(ctx); err != nil {
		return nil, fmt.Errorf("load leases: %w", err)
	}
	return n, nil
}

// wireRoles builds the provider and the submitter and the stream handlers
// that reach them.
func (n *Node) wireRoles() {
	calls := caller{n}
	addrs := addrBook{n}
	n.provider = provider.New(provider.Config{
		DataDir:         n.cfg.DataDir,
		ProposalTTL:     n.cfg.ProposalTTL,
		ReceiptInterval: n.cfg.ReceiptInterval,
		Grace:           n.cfg.Grace,
		OutputTimeout:   n.cfg.OutputTimeout,
		Retention:       n.cfg.Retention,
		EventTimeout:    n.cfg.EventTimeout,
		ReceiptTimeout:  n.cfg.ReceiptTimeout,
		ImagePull:       n.cfg.ImagePull,
		RequireImage:    n.cfg.RequireImage,
		MaxJobDisk:      n.cfg.MaxJobDisk,
		SingleSource:    n.cfg.SingleSource,
		Prestage:        !n.cfg.NoPrestage,
		Limits:          content.Limits{MaxBytes: n.cfg.MaxInputBytes, MaxEntries: n.cfg.MaxEntries, MaxDepth: n.cfg.MaxDepth},
	}, provider.Deps{
		Key: n.key, Self: n.self, GPUs: n.gpus, Store: n.store, Fetcher: n.exchange, Ledger: n.ledger,
		Calls: calls, Gossip: n.gossip, Jobs: n.market, Access: n.access, Records: n.state, AddrBook: addrs,
		Metrics: n.metrics.provider, Log: n.log, OfferChanged: n.signalOfferChanged, Rematch: n.signalWork, HeldElsewhere: n.heldElsewhere, Path: n.Path,
		Runner: n.runner, Images: providerImages(n), Misbehave: n.cfg.Misbehave,
		Disks: providerDisks(n), SeeGPUs: providerSeeGPUs(n),
	})
	n.submitter = submitter.New(submitter.Config{
		ProposalTTL:       n.cfg.ProposalTTL,
		Heartbeat:         n.cfg.Heartbeat,
		OutputTimeout:     n.cfg.OutputTimeout,
		ProviderLostAfter: n.cfg.ProviderLostAfter,
		MaxInputBytes:     n.cfg.MaxInputBytes,
		MaxOutputBytes:    n.cfg.MaxOutputBytes,
		RequeueEvery:      requeueEvery * n.cfg.Heartbeat,
		NoLocality:        n.cfg.NoLocality,
		LocalityWait:      n.cfg.LocalityWait,
		// A provider proposes in the epoch Match assigns it a job; a few
		// epochs more cover a view that lags, and a proposal's wait.
		AvoidAfter: n.cfg.ProposalTTL + 3*n.cfg.Epoch,
		// An honest provider offers a receipt one interval into the lease,
		// staging or not, and another every interval after.
		RunWithin:   2*n.cfg.ReceiptInterval + n.cfg.ProposalTTL,
		ReceiptsDue: 2*n.cfg.ReceiptInterval + n.cfg.ReceiptTimeout,
	}, submitter.Deps{
		Key: n.key, Self: n.self, Store: n.submitterStore(), Fetcher: n.exchange, Ledger: n.ledger, Calls: calls, Path: n.Path,
		Gossip: n.gossip, Offers: n.offers, Leases: n.market, Access: n.access, Records: n.state,
		Metrics: n.metrics.submitter, Log: n.log, Addrs: n.Addrs, Images: n.submitterImages(),
	})
	n.handlers[wire.ProtoLease] = n.submitter.HandleProposal
	n.handlers[wire.ProtoEvent] = n.submitter.HandleEvent
	n.handlers[wire.ProtoOutput] = n.submitter.HandleOutput
	n.handlers[wire.ProtoReceipt] = n.submitter.HandleReceipt
	n.handlers[wire.ProtoLogs] = n.provider.HandleLogs
	n.handlers[wire.ProtoStage] = n.submitter.HandleStage
	n.handlers[wire.ProtoRelay] = n.provider.HandleRelay
	n.handlers[wire.ProtoWithdraw] = func(_ context.Context, from peer.ID, raw json.RawMessage) (any, error) {
		var req wire.WithdrawRequest
		if err := p2p.DecodeStrict(raw, &req); err != nil {
			return nil, err
		}
		n.provider.Withdraw(req.Job, from)
		return struct{}{}, nil
	}
}

// requeueEvery is how many heartbeats pass between re-announcements of
// queued jobs; prune drops an open job not re-announced for three times
// that.
const requeueEvery = 3

// handlerTimeouts bound how long each direct-stream request may take.
func (n *Node) handlerTimeout(proto protocol.ID) time.Duration {
	switch proto {
	case wire.ProtoLease:
		return n.cfg.ProposalTTL
	case wire.ProtoOutput:
		return n.cfg.OutputTimeout
	}
	return streamTimeout
}

// streamTimeout bounds a step event, a receipt or a withdrawal request: each
// answers from memory and the ledger, in well under a second.
const streamTimeout = 30 * time.Second

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

// Run serves until ctx is cancelled, then shuts everything down, waiting
// for work in flight at most ShutdownTimeout.
func (n *Node) Run(ctx context.Context) error {
	loopCtx, stopLoops := context.WithCancel(ctx)
	b := p2p.StartBootstrap(loopCtx, n.host, n.boot, n.log)
	var srv *apiserver.Server
	defer func() {
		stopLoops()
		b.Wait()
		n.shutdown(srv)
	}()
	n.redialKnownPeers(loopCtx)
	if n.cfg.MDNS {
		closeMDNS, err := p2p.StartMDNS(loopCtx, n.host, n.cfg.Network, n.log)
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

	for proto, fn := range n.handlers {
		p2p.Serve(loopCtx, n.host, proto, n.handlerTimeout(proto), n.log, n.tracked(proto, fn), p2p.OnPanic(n.metrics.panicked))
	}
	acfg := apiserver.Config{GetLimits: n.outputLimits(), Addr: n.cfg.API, Network: n, Jobs: n.submitter, Content: n.store, Images: n.images, Ledger: n.ledger, Logs: n.submitter, Doctor: n.cfg.Doctor, Log: n.log, Panicked: n.metrics.panicked}
	if n.cfg.DebugPartition {
		acfg.Block = n.block
	}
	if n.cfg.RawContent {
		acfg.PutCAR = n.putRawCAR
	}
	if srv, err = apiserver.Listen(loopCtx, acfg); err != nil {
		return err
	}
	if n.cfg.UI != "" {
		ui, err := apiserver.ListenUI(loopCtx, n.cfg.UI, acfg)
		if err != nil {
			return err
		}
		defer func() {
			stopLoops() // ends the page's open log requests
			ctx, cancel := context.WithTimeout(context.Background(), n.cfg.ShutdownTimeout)
			defer cancel()
			_ = ui.Shutdown(ctx)
		}()
		n.log.Info("dashboard", "url", "http://"+ui.Addr()+"/ui/")
	}
	if n.cfg.Metrics != "" {
		stop, err := n.metrics.serve(n.cfg.Metrics)
		if err != nil {
			return fmt.Errorf("metrics on %s: %w", n.cfg.Metrics, err)
		}
		defer stop()
	}

	n.loops.Go(func() { n.receiveOffers(loopCtx, offersSub) })
	n.loops.Go(func() { n.publishOffers(loopCtx) })
	n.loops.Go(func() { n.expireOffers(loopCtx) })
	n.loops.Go(func() { n.receiveJobs(loopCtx, jobsSub) })
	n.loops.Go(func() { n.matchLoop(loopCtx) })
	n.loops.Go(func() { n.fastLoop(loopCtx) })
	n.submitter.Start()
	n.provider.Resume()

	info, err := n.writeRunFile(srv.Addr())
	if err != nil {
		return err
	}
	defer os.Remove(filepath.Join(n.cfg.DataDir, RunFile))
	n.log.Info("e31d ready", "peer_id", n.self, "api", srv.Addr(), "addrs", n.Addrs(), "gpus", len(n.gpus), "compute", n.runner != nil, "network", n.cfg.Network)
	if n.cfg.OnReady != nil {
		n.cfg.OnReady(info)
	}

	<-ctx.Done()
	n.log.Info("e31d stopping")
	return nil
}

// tracked wraps a stream handler so that shutdown waits for the requests
// being answered and refuses new ones.
func (n *Node) tracked(proto protocol.ID, fn p2p.Handler) p2p.Handler {
	return func(ctx context.Context, from peer.ID, raw json.RawMessage) (out any, err error) {
		if !n.inflight.Do(func() { out, err = fn(ctx, from, raw) }) {
			return nil, errShuttingDown
		}
		if lose := n.cfg.testLoseReply; lose != nil && lose(proto, from) {
			return nil, errors.New("reply lost")
		}
		return out, err
	}
}

var errShuttingDown = errors.New("the node is shutting down")

// shutdown stops, in order: new requests (streams, API), the roles' work
// (bounded by ShutdownTimeout), the node's loops, then closes the host and
// the stores.
func (n *Node) shutdown(srv *apiserver.Server) {
	ctx, cancel := context.WithTimeout(context.Background(), n.cfg.ShutdownTimeout)
	defer cancel()
	for proto := range n.handlers {
		n.host.RemoveStreamHandler(proto)
	}
	if srv != nil {
		if err := srv.Shutdown(ctx); err != nil {
			n.log.Warn("api shutdown", "err", err)
		}
	}
	if err := n.submitter.Shutdown(ctx); err != nil {
		n.log.Warn("submitter shutdown", "err", err)
	}
	if err := n.provider.Shutdown(ctx); err != nil {
		n.log.Warn("provider shutdown", "err", err)
	}
	if err := n.inflight.Wait(ctx); err != nil {
		// Their contexts ended with the loops': they return soon, and
		// before the stores close.
		n.log.Warn("requests still being answered at shutdown", "err", err)
		_ = n.inflight.Wait(context.Background())
	}
	_ = n.loops.Wait(context.Background())
	n.closeStores()
	if n.runDir != "" {
		if err := exec.RemoveRunDir(n.runDir); err != nil {
			n.log.Warn("remove the sandbox's run directory", "err", err)
		}
	}
}

// closeStores releases the host and the stores, in reverse order of
// opening.
func (n *Node) closeStores() {
	for _, c := range []struct {
		name  string
		close func() error
	}{{"exchange", n.exchange.Close}, {"host", n.host.Close}, {"layers", n.images.Close}, {"blocks", n.store.Close}, {"ledger", n.ledger.Close}, {"state", n.state.Close}} {
		if err := c.close(); err != nil {
			n.log.Warn("close", "what", c.name, "err", err)
		}
	}
}

func (n *Node) writeRunFile(api string) (RunInfo, error) {
	info := RunInfo{PeerID: n.self.String(), API: api, Addrs: n.Addrs(), PID: os.Getpid()}
	b, err := json.MarshalIndent(info, "", "  ")
	if err != nil {
		return info, err
	}
	path := filepath.Join(n.cfg.DataDir, RunFile)
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return info, fmt.Errorf("write run file: %w", err)
	}
	return info, os.Rename(tmp, path)
}

// block cuts this node off from peers (POST /v1/debug/block).
func (n *Node) block(ids []peer.ID) {
	n.gater.Block(ids)
	for _, id := range ids {
		_ = n.host.Network().ClosePeer(id)
	}
}
