package p2p

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"
)

// ErrRelayedOnly is returned by AwaitDirect when a peer stays reachable
// through a relay alone that limits its circuits: enough for small control
// messages, never for bulk data (relay v2's default limits, by design).
var ErrRelayedOnly = errors.New("only a relayed one, which carries no data")

// DirectWait is how long a bulk transfer waits for a direct connection when
// only a relayed one exists: hole punching runs as soon as two peers meet
// through a relay and takes seconds when it works.
const DirectWait = 30 * time.Second

// RelayDataWait is how long a circuit through a relay that carries data
// waits, once open, before bulk data goes over it, unless a hole punch
// fails sooner: long enough for a punch that works (a second or two), and
// no longer, for a direct path is faster and spares the relay's uplink.
// The node's path function applies it (reach.Punches.Path).
const RelayDataWait = 3 * time.Second

// AwaitDirect waits until this node's path to p (who, in errors: "the
// submitter") can carry bulk data, and reports it: a direct connection, or
// a circuit through a relay that carries data. With only a relayed path
// that does not, it waits up to within for a hole to be punched, then
// fails wrapping ErrRelayedOnly. path is how the node tells its path to a
// peer and, when relayed, what the last hole punch said.
func AwaitDirect(ctx context.Context, path func(peer.ID) (Path, string), p peer.ID, who string, within time.Duration) (Path, error) {
	deadline := time.Now().Add(within)
	for {
		got, why := path(p)
		switch {
		case got != PathRelayed:
			return got, nil
		case !time.Now().Before(deadline):
			return got, fmt.Errorf("no direct connection to %s after %s, %w (%s)", who, within, ErrRelayedOnly, why)
		}
		t := time.NewTimer(250 * time.Millisecond)
		select {
		case <-ctx.Done():
			t.Stop()
			return got, ctx.Err()
		case <-t.C:
		}
	}
}
