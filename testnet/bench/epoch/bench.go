package epoch

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/e31network/e31/node/task"
	"github.com/e31network/e31/p2p"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/peer"
	ma "github.com/multiformats/go-multiaddr"
)

// Mode is how peers cut an epoch's view and which epoch delay they use.
type Mode int

// The modes measured: the node before (arrival cut, fixed 150ms), the
// signed cut alone with 150ms and 300ms, and the node now.
const (
	Before Mode = iota
	SignedFixed
	Signed300
	Adaptive
)

// Name is how the table names the mode.
func (m Mode) Name() string {
	switch m {
	case Before:
		return "before: arrival cut, 150ms"
	case SignedFixed:
		return "signed cut, 150ms"
	case Signed300:
		return "signed cut, 300ms"
	case Adaptive:
		return "after: signed cut, adaptive"
	}
	return fmt.Sprintf("mode %d", int(m))
}

// signedCut is whether the mode cuts on signing times (view.CutTime), as
// nodes do now, rather than on arrival times, as nodes did before.
func (m Mode) signedCut() bool { return m != Before }

// fixed is the mode's fixed epoch delay; zero adapts it (view.DelayRule).
func (m Mode) fixed() time.Duration {
	switch m {
	case Before, SignedFixed:
		return 150 * time.Millisecond
	case Signed300:
		return 300 * time.Millisecond
	}
	return 0
}

// Params sizes one run. Zero fields take the defaults named.
type Params struct {
	Latency    time.Duration // one-way, on every link
	Jobs       int           // default 300
	Providers  int           // default 4, each with GPUs enough for every job
	Submitters int           // default 2
	Epoch      time.Duration // default 1s, as node.Config
	// Window is the time over which the jobs are declared, at uniformly
	// random instants; default 50ms per job.
	Window time.Duration
	// Warmup lets offers, and the gossip delays they announce, spread
	// before the first job; default 4 epochs.
	Warmup time.Duration
	Mode   Mode
	Seed   uint64
}

func (p Params) withDefaults() Params {
	def := func(v *int, d int) {
		if *v == 0 {
			*v = d
		}
	}
	def(&p.Jobs, 300)
	def(&p.Providers, 4)
	def(&p.Submitters, 2)
	if p.Epoch == 0 {
		p.Epoch = time.Second
	}
	if p.Window == 0 {
		p.Window = time.Duration(p.Jobs) * 50 * time.Millisecond
	}
	if p.Warmup == 0 {
		p.Warmup = 4 * p.Epoch
	}
	return p
}

// Run measures one configuration on fresh peers.
func Run(ctx context.Context, p Params) (Result, error) {
	p = p.withDefaults()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	rec := newRecorder()
	gpus := (p.Jobs + p.Providers - 1) / p.Providers
	var peers []*simPeer
	defer func() {
		for _, sp := range peers {
			sp.host.Close()
		}
	}()
	for i := range p.Providers + p.Submitters {
		n := 0
		if i < p.Providers {
			n = gpus
		}
		sp, err := newSimPeer(ctx, n, p, rec)
		if err != nil {
			return Result{}, err
		}
		peers = append(peers, sp)
	}
	// Every pair of peers is joined by one connection through its own
	// delay line, dialled by the lower-numbered peer: gossip and the
	// proposal streams both cross it.
	for j, to := range peers {
		tcp, err := tcpPort(to.host)
		if err != nil {
			return Result{}, err
		}
		for _, from := range peers[:j] {
			line, err := newDelayLine(ctx, fmt.Sprintf("127.0.0.1:%d", tcp), p.Latency)
			if err != nil {
				return Result{}, fmt.Errorf("delay line: %w", err)
			}
			defer line.Close()
			addr, err := ma.NewMultiaddr(fmt.Sprintf("/ip4/127.0.0.1/tcp/%d", line.Port()))
			if err != nil {
				return Result{}, err
			}
			if err := from.host.Connect(ctx, peer.AddrInfo{ID: to.id, Addrs: []ma.Multiaddr{addr}}); err != nil {
				return Result{}, fmt.Errorf("connect peers: %w", err)
			}
		}
	}
	if err := waitMesh(ctx, peers); err != nil {
		return Result{}, err
	}

	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	wg.Go(func() { rec.probeLag(ctx) })
	for _, sp := range peers {
		sp.serveProposals(ctx)
		wg.Go(func() { sp.receiveOffers(ctx) })
		wg.Go(func() { sp.receiveJobs(ctx) })
		wg.Go(func() { sp.matchLoop(ctx, &wg) })
		if sp.isProvider() {
			wg.Go(func() { sp.publishOffers(ctx) })
		}
	}
	if err := task.Sleep(ctx, p.Warmup); err != nil {
		return Result{}, err
	}
	rec.start()

	// Declare the jobs at random instants of the window, round-robin over
	// the submitters.
	rng := rand.New(rand.NewPCG(p.Seed, 31))
	at := make([]time.Duration, p.Jobs)
	for i := range at {
		at[i] = time.Duration(rng.Int64N(int64(p.Window)))
	}
	slices.Sort(at)
	begin := time.Now()
	for i, d := range at {
		if err := task.Sleep(ctx, time.Until(begin.Add(d))); err != nil {
			return Result{}, err
		}
		sub := peers[p.Providers+i%p.Submitters]
		if err := sub.declare(ctx, i); err != nil {
			return Result{}, err
		}
	}
	// Let the last jobs be leased: a few epochs, or until every job is.
	deadline := time.Now().Add(5 * p.Epoch)
	for rec.leasedJobs() < p.Jobs && time.Now().Before(deadline) {
		if err := task.Sleep(ctx, p.Epoch/4); err != nil {
			return Result{}, err
		}
	}
	cancel()
	wg.Wait()
	res := rec.result(peers[:p.Providers], peers[p.Providers:])
	res.Latency, res.Mode, res.Jobs = p.Latency, p.Mode.Name(), p.Jobs
	return res, nil
}

// tcpPort is the loopback TCP port a host listens on.
func tcpPort(h host.Host) (int, error) {
	for _, a := range h.Addrs() {
		if v, err := a.ValueForProtocol(ma.P_TCP); err == nil {
			return strconv.Atoi(v)
		}
	}
	return 0, errors.New("host listens on no TCP port")
}

// waitMesh waits until every peer sees every other on both topics, so that
// no message of the run is lost to a mesh still forming.
func waitMesh(ctx context.Context, peers []*simPeer) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for {
		ready := true
		for _, sp := range peers {
			for _, topic := range []string{p2p.TopicOffers, p2p.TopicJobs} {
				if len(sp.gossip.TopicPeers(topic)) < len(peers)-1 {
					ready = false
				}
			}
		}
		if ready {
			return nil
		}
		if err := task.Sleep(ctx, 20*time.Millisecond); err != nil {
			return errors.New("gossip mesh did not form within 30s")
		}
	}
}
