package p2p

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"
)

// ErrRelayedOnly is returned by AwaitDirect when a peer stays reachable
// through a relay alone: enough for small control messages, never for bulk
// data (relay v2 limits what a circuit carries, by design).
var ErrRelayedOnly = errors.New("only a relayed one, which carries no data")

// DirectWait is how long a bulk transfer waits for a direct connection when
// only a relayed one exists: hole punching runs as soon as two peers meet
// through a relay and takes seconds when it works.
const DirectWait = 30 * time.Second

// AwaitDirect waits, up to within, until this node's path to p (who, in
// errors: "the submitter") is not
// relayed-only (hole punching runs as soon as two peers meet through a
// relay and takes seconds when it works). path is how the node tells its
// path to a peer and, when relayed, what the last hole punch said.
func AwaitDirect(ctx context.Context, path func(peer.ID) (Path, string), p peer.ID, who string, within time.Duration) error {
	deadline := time.Now().Add(within)
	for {
		got, why := path(p)
		if got != PathRelayed {
			return nil
		}
		if !time.Now().Before(deadline) {
			return fmt.Errorf("no direct connection to %s after %s, %w (%s)", who, within, ErrRelayedOnly, why)
		}
		t := time.NewTimer(250 * time.Millisecond)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
	}
}
