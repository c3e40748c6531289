package node

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"time"

	"github.com/e31network/e31/node/api"
	"github.com/e31network/e31/node/apiserver"
	"github.com/e31network/e31/node/metrics"
	"github.com/e31network/e31/node/provider"
	"github.com/e31network/e31/p2p"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/protocol"
)

// Run serves until ctx is cancelled, then shuts everything down, waiting
// for work in flight at most ShutdownTimeout.
func (n *Node) Run(ctx context.Context) error {
	// The loops outlive ctx for as long as the stop's drain takes.
	loopCtx, stopLoops := context.WithCancel(context.WithoutCancel(ctx))
	b := p2p.StartBootstrap(loopCtx, n.host, n.boot, n.log)
	var srv *apiserver.Server
	defer func() {
		stopLoops()
		b.Wait()
		n.shutdown(srv)
	}()
	n.peers.Redial(loopCtx)
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
		p2p.Serve(loopCtx, n.host, proto, n.handlerTimeout(proto), n.log, n.tracked(proto, fn), p2p.OnPanic(n.metrics.Panicked))
	}
	// The token is made at the first start and kept, whatever the API
	// listens on, so that one given out goes on working across restarts
	// and a move of the API to TCP.
	access, err := apiserver.LoadAccess(filepath.Join(n.cfg.DataDir, api.TokenFile))
	if err != nil {
		return err
	}
	acfg := apiserver.Config{GetLimits: n.outputLimits(), Addr: n.cfg.API, Network: n.net, Jobs: n.submitter, Content: n.store, Images: n.images, Ledger: n.ledger, Drainer: n.provider, Leases: provider.NewLeaseQuery(n.provider, n.ledger), Logs: n.submitter, Doctor: doctorWithReach(n.cfg.Doctor, n.reach.Status), Log: n.log, Panicked: n.metrics.Panicked, Access: access}
	acfg.Market = func() api.Market { return marketOf(n.digests, n.shard, time.Now()) }
	if n.cfg.DebugPartition {
		acfg.Block = n.block
	}
	acfg.PutCAR = n.raw.debugCAR()
	// The dashboard's own listener first: the API's one-time links
	// (e31 ui) lead there.
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
		acfg.Dashboard = "http://" + ui.Addr()
		n.log.Info("dashboard", "url", "http://"+ui.Addr()+"/ui/", "open", "e31 ui")
	}
	if srv, err = apiserver.Listen(loopCtx, acfg); err != nil {
		return err
	}
	if n.cfg.Metrics != "" {
		stop, err := n.metrics.Serve(n.cfg.Metrics)
		if err != nil {
			return fmt.Errorf("metrics on %s: %w", n.cfg.Metrics, err)
		}
		defer stop()
		if a, err := net.ResolveTCPAddr("tcp", n.cfg.Metrics); err == nil && !metrics.Profiled(a) {
			n.log.Info("Go profiles are served on a loopback --metrics address only", "metrics", n.cfg.Metrics)
		}
	}

	n.loops.Go(func() { n.shardMates.Run(loopCtx) })
	n.loops.Go(func() { n.reach.Run(loopCtx) })
	n.loops.Go(func() { n.feed.receiveOffers(loopCtx, offersSub) })
	n.loops.Go(func() { n.feed.expireOffers(loopCtx) })
	n.loops.Go(func() { n.feed.receiveJobs(loopCtx, jobsSub) })
	if n.follows != nil {
		n.loops.Go(func() { n.follows.Run(loopCtx) })
	}
	if err := n.startDigests(loopCtx); err != nil {
		return err
	}
	n.loops.Go(func() { n.epochs.Run(loopCtx) })
	// A node with no GPUs, or no runtime to run jobs in, offers nothing,
	// and has nothing to lease between epochs.
	if n.compute.Offers() {
		n.loops.Go(func() { n.offer.Run(loopCtx) })
		if !n.cfg.NoFastPath {
			n.loops.Go(func() { n.fast.Run(loopCtx) })
		}
	}
	n.submitter.Start()
	n.provider.Resume()
	watcher, closeUse, err := reclaimer(loopCtx, n.cfg, n.compute, n.provider, n.log)
	if err != nil {
		return err
	}
	if watcher != nil {
		n.loops.Go(func() {
			defer closeUse()
			watcher.Run(loopCtx)
		})
	}

	info, err := n.writeRunFile(srv.Addr())
	if err != nil {
		return err
	}
	defer os.Remove(filepath.Join(n.cfg.DataDir, RunFile))
	n.log.Info("e31d ready", "peer_id", n.self, "api", srv.Addr(), "addrs", n.Addrs(), "gpus", len(n.compute.GPUs), "compute", n.compute.Runner != nil, "network", n.cfg.Network, "shard", n.shard.String())
	if n.cfg.OnReady != nil {
		n.cfg.OnReady(info)
	}

	<-ctx.Done()
	n.log.Info("e31d stopping")
	n.drainToStop()
	return nil
}

// drainToStop drains the node before a stop, so that what runs ends
// preempted after a last checkpoint and goes on elsewhere, rather than
// lost with the node: running leases go on for StopDrain, then each run
// gets its grace. A negative StopDrain stops them with the node, as lost.
func (n *Node) drainToStop() {
	if n.cfg.StopDrain < 0 || n.provider.Counts().Leases == 0 {
		return
	}
	n.log.Info("draining the leases before stopping", "let run for", n.cfg.StopDrain)
	ctx, cancel := context.WithTimeout(context.Background(), n.cfg.StopDrain+n.cfg.ShutdownTimeout+time.Minute)
	defer cancel()
	n.provider.DrainToStop(ctx, n.cfg.StopDrain)
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
		if code := p2p.RefusalCode(err); code != "" {
			n.refused(proto, from, code, err)
		}
		return out, err
	}
}

// refused counts a request refused with a code, by protocol and code, and
// names it in the log: each is a peer's claim this node did not believe,
// or a request it could not serve in the state it was in.
func (n *Node) refused(proto protocol.ID, from peer.ID, code string, err error) {
	n.metrics.Refused(string(proto), code)
	n.log.Info("request refused", "proto", proto, "peer", from, "code", code, "err", err)
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
	if err := n.compute.Close(); err != nil {
		n.log.Warn("remove the sandbox's run directory", "err", err)
	}
	// Last: the next daemon on this data dir may start now.
	if err := n.dirLock.Release(); err != nil {
		n.log.Warn("release the data dir", "err", err)
	}
}

// closeStores releases the host and the stores, in reverse order of
// opening.
func (n *Node) closeStores() {
	if n.gangs != nil {
		if err := n.gangs.Close(); err != nil {
			n.log.Warn("close", "what", "gang networks", "err", err)
		}
	}
	for _, c := range []struct {
		name  string
		close func() error
	}{{"exchange", n.exchange.Close}, {"host", n.host.Close}, {"layers", n.images.Close}, {"blocks", n.store.Close}, {"ledger", n.ledger.Close}, {"state", n.state.Close}} {
		if err := c.close(); err != nil {
			n.log.Warn("close", "what", c.name, "err", err)
		}
	}
	n.endLife()
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
