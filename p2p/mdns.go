package p2p

import (
	"context"
	"log/slog"

	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/p2p/discovery/mdns"
)

// StartMDNS announces the host on the local network and connects to the E31
// peers it hears of. It multicasts on every interface, so it is only started
// when asked for (a LAN deployment), never in tests or the testnet.
func StartMDNS(ctx context.Context, h host.Host, network string, log *slog.Logger) (close func() error, err error) {
	svc := mdns.NewMdnsService(h, "e31-"+network, mdnsNotifee{ctx: ctx, h: h, log: log})
	if err := svc.Start(); err != nil {
		return nil, err
	}
	return svc.Close, nil
}

type mdnsNotifee struct {
	ctx context.Context
	h   host.Host
	log *slog.Logger
}

func (n mdnsNotifee) HandlePeerFound(p peer.AddrInfo) {
	if p.ID == n.h.ID() {
		return
	}
	if err := n.h.Connect(n.ctx, p); err != nil {
		n.log.Debug("mdns peer unreachable", "peer", p.ID, "err", err)
	}
}
