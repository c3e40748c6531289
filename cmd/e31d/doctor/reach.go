package doctor

import (
	"context"
	"crypto/rand"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/e31network/e31/node/reach"
	"github.com/e31network/e31/p2p"
	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/peer"
)

// ReachOptions say how the reachability check reaches the network, as
// e31d would.
type ReachOptions struct {
	// Listen are the --listen multiaddrs; none means e31d's default.
	Listen []string
	// NAT is --nat (auto, on, off).
	NAT string
	// Bootstrap are the --bootstrap multiaddrs: the peers asked, and the
	// relays a node behind a NAT holds a slot on.
	Bootstrap []string
	// Wait bounds the check; zero: DefaultReachWait.
	Wait time.Duration
}

// DefaultReachWait bounds the reachability check: AutoNAT's first
// dial-back comes some 15 s after a host starts.
const DefaultReachWait = 45 * time.Second

// reachConnectTimeout bounds the dial of each bootstrap peer.
const reachConnectTimeout = 10 * time.Second

// Reach checks whether peers of the network could reach e31d on this
// machine: it starts a short-lived host of its own on the daemon's listen
// addresses (on other ports where the daemon holds them), with the
// daemon's NAT traversal, connects to the bootstrap peers and asks:
// public (a bootstrap peer dialled it back), relayed (a bootstrap peer
// serves as a relay, which gives the daemon a slot once its first offer
// reaches it), or unreachable and why, with the fix. It fails for an
// unreachable machine: its daemon would get no work.
func Reach(ctx context.Context, o ReachOptions) Result {
	const name = "reachability"
	on, err := reach.Traverse(o.NAT, o.Listen)
	if err != nil {
		return result(name, Fail, "fix --nat or --listen", "%v", err)
	}
	if !on {
		return result(name, OK, "", "not checked: NAT traversal is off (--nat off, or every --listen address is loopback)")
	}
	boot, err := p2p.ParseBootstrap(o.Bootstrap)
	if err != nil {
		return result(name, Fail, "fix --bootstrap", "%v", err)
	}
	behindNAT, err := reach.BehindNAT(o.Listen)
	if err != nil {
		return result(name, Fail, "fix --listen", "%v", err)
	}
	if len(boot) == 0 {
		if behindNAT {
			// Without bootstrap peers the daemon joins no network but
			// the one peers make by bootstrapping from it, which they
			// cannot here.
			s := reach.Explain(reach.Facts{Traversal: true, Reach: p2p.ReachPrivate})
			return result(name, Warn, s.Fix, "%s; %s (no address this machine listens on is public)", reach.NoWork, s.Why)
		}
		return result(name, Warn, "name the network's bootstrap peers (--bootstrap) to check through them",
			"not checked: no bootstrap peer to ask whether it can dial this machine")
	}
	wait := o.Wait
	if wait <= 0 {
		wait = DefaultReachWait
	}
	ctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	h, moved, err := reachHost(o.Listen, reach.Reachability(true, behindNAT, nil, boot, reach.NewPunches(0)))
	if err != nil {
		return result(name, Fail, "check --listen", "start a host to ask the bootstrap peers: %v", err)
	}
	defer h.Close()
	s, f := askBootstrap(ctx, h, boot)
	where := fmt.Sprintf("through %d bootstrap peers", len(boot))
	if moved {
		where += ", from ports of its own (the daemon holds its --listen ports)"
	}
	switch {
	case s.State == reach.StatePublic:
		return result(name, OK, "", "public: peers dial this machine directly (%s)", where)
	case s.State == reach.StateRelayed:
		return result(name, OK, "", "relayed through %s: behind a NAT, peers reach this machine through the relay (%s)", strings.Join(s.Relays, ", "), where)
	case s.State == reach.StateUnreachable && f.BootRelays > 0:
		// A relay gives a slot only to a member of its network: the
		// daemon becomes one with its first offer, this host never.
		return result(name, OK, "", "relayed: behind a NAT, and %d bootstrap peers serve as a relay, on which e31d will hold a slot once its first offer reaches them (%s)", f.BootRelays, where)
	case s.State == reach.StateUnreachable:
		return result(name, Fail, s.Fix, "unreachable: %s; %s (%s)", reach.NoWork, s.Why, where)
	}
	return result(name, Warn, "run it again; if it says so again, check that the bootstrap peers run e31d with NAT traversal on (--nat)",
		"unknown after %s: %s (%s; connected to %d)", wait, s.Why, where, f.BootConnected)
}

// reachHost starts a host on listen, or, where those ports are taken (a
// running daemon holds them), on free ports of the same addresses; moved
// says so.
func reachHost(listen []string, r p2p.Reachability) (h host.Host, moved bool, err error) {
	key, _, err := crypto.GenerateEd25519Key(rand.Reader)
	if err != nil {
		return nil, false, err
	}
	cfg := p2p.HostConfig{Key: key, Listen: listen, UserAgent: "e31d-doctor", Reachability: r}
	if h, err = p2p.NewHost(cfg); err == nil {
		return h, false, nil
	}
	if len(listen) == 0 {
		listen = p2p.DefaultListen
	}
	cfg.Listen = nil
	for _, a := range listen {
		cfg.Listen = append(cfg.Listen, anyPort.ReplaceAllString(a, "/${1}/0"))
	}
	h, err2 := p2p.NewHost(cfg)
	if err2 != nil {
		return nil, false, err
	}
	return h, true, nil
}

// anyPort is the port of a TCP or UDP multiaddr.
var anyPort = regexp.MustCompile(`/(tcp|udp)/[0-9]+`)

// askBootstrap connects h to the bootstrap peers and waits until its
// reachability is settled or ctx ends: public, relayed, or private with
// every bootstrap peer tried and described by identify.
func askBootstrap(ctx context.Context, h host.Host, boot []peer.AddrInfo) (reach.Status, reach.Facts) {
	for _, b := range boot {
		cctx, cancel := context.WithTimeout(ctx, reachConnectTimeout)
		_ = h.Connect(cctx, b)
		cancel()
	}
	identified := func() bool {
		for _, b := range boot {
			if len(h.Network().ConnsToPeer(b.ID)) == 0 {
				continue
			}
			if ps, err := h.Peerstore().GetProtocols(b.ID); err != nil || len(ps) == 0 {
				return false
			}
		}
		return true
	}
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for {
		f := reach.Observe(h, true, boot)
		s := reach.Explain(f)
		switch {
		case s.State == reach.StatePublic, s.State == reach.StateRelayed:
			return s, f
		case s.State == reach.StateUnreachable && identified():
			return s, f
		}
		select {
		case <-ctx.Done():
			return s, f
		case <-tick.C:
		}
	}
}
