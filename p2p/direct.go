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

// RelayDataWait is how long a bulk transfer waits for a direct connection
// when a relay that carries data connects the two peers already: long
// enough for a hole punch that works, and no longer, for the relay's
// uplink is shared and a direct path is faster.
const RelayDataWait = 5 * time.Second

// AwaitDirect waits until this node's path to p (who, in errors: "the
// submitter") can carry bulk data, and reports it: a direct connection, or
// after RelayDataWait (capped at within) a circuit through a relay that
// carries data. With only a limited relay it waits up to within for a hole
// to be punched, then fails wrapping ErrRelayedOnly. path is how the node
// tells its path to a peer and, when relayed, what the last hole punch said.
func AwaitDirect(ctx context.Context, path func(peer.ID) (Path, string), p peer.ID, who string, within time.Duration) (Path, error) {
	start := time.Now()
	deadline := start.Add(within)
	for {
		got, why := path(p)
		switch {
		case got != PathRelayed && got != PathRelayedData:
			return got, nil
		case got == PathRelayedData && !time.Now().Before(start.Add(min(RelayDataWait, within))):
			return got, nil
		case got == PathRelayed && !time.Now().Before(deadline):
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
