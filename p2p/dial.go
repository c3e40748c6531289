package p2p

import (
	"context"
	"fmt"

	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/peer"
)

// Dial connects h to the peers addrs name, multiaddrs ending in /p2p/ID,
// one after the other, and stops at the first that does not parse or
// cannot be reached.
func Dial(ctx context.Context, h host.Host, addrs ...string) error {
	for _, a := range addrs {
		ai, err := peer.AddrInfoFromString(a)
		if err != nil {
			return fmt.Errorf("%q: %w", a, err)
		}
		if err := h.Connect(ctx, *ai); err != nil {
			return fmt.Errorf("connect %s: %w", ai.ID, err)
		}
	}
	return nil
}
