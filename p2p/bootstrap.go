package p2p

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/peerstore"
	ma "github.com/multiformats/go-multiaddr"
)

// Backoff bounds for reconnecting to a bootstrap peer.
const (
	minBackoff = 250 * time.Millisecond
	maxBackoff = 5 * time.Second
)

// ParseBootstrap turns multiaddrs ending in /p2p/<peer ID> into AddrInfos,
// merging several addresses of the same peer.
func ParseBootstrap(addrs []string) ([]peer.AddrInfo, error) {
	var mas []ma.Multiaddr
	for _, a := range addrs {
		m, err := ma.NewMultiaddr(a)
		if err != nil {
			return nil, fmt.Errorf("bootstrap address %q: %w", a, err)
		}
		mas = append(mas, m)
	}
	infos, err := peer.AddrInfosFromP2pAddrs(mas...)
	if err != nil {
		return nil, fmt.Errorf("bootstrap addresses must end in /p2p/<peer ID>: %w", err)
	}
	return infos, nil
}

// Bootstrapper keeps a host connected to its bootstrap peers, reconnecting
// with exponential backoff when a connection drops.
type Bootstrapper struct {
	h     host.Host
	log   *slog.Logger
	peers []peer.AddrInfo
	wg    sync.WaitGroup
}

// StartBootstrap connects h to peers and keeps it connected until ctx ends.
// Call Wait after cancelling ctx to be sure every goroutine has stopped.
func StartBootstrap(ctx context.Context, h host.Host, peers []peer.AddrInfo, log *slog.Logger) *Bootstrapper {
	b := &Bootstrapper{h: h, log: log, peers: peers}
	for _, p := range peers {
		if p.ID == h.ID() {
			continue
		}
		h.Peerstore().AddAddrs(p.ID, p.Addrs, peerstore.PermanentAddrTTL)
		b.wg.Add(1)
		go b.keep(ctx, p)
	}
	return b
}

// Wait blocks until every reconnect loop has returned.
func (b *Bootstrapper) Wait() { b.wg.Wait() }

func (b *Bootstrapper) keep(ctx context.Context, p peer.AddrInfo) {
	defer b.wg.Done()
	backoff := minBackoff
	for {
		if b.h.Network().Connectedness(p.ID) != network.Connected {
			cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			err := b.h.Connect(cctx, p)
			cancel()
			if err != nil {
				if ctx.Err() != nil {
					return
				}
				b.log.Debug("bootstrap connect failed", "peer", p.ID, "retry_in", backoff, "err", err)
				backoff = min(backoff*2, maxBackoff)
			} else {
				b.log.Info("connected to bootstrap peer", "peer", p.ID)
				backoff = minBackoff
			}
		}
		t := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
}
