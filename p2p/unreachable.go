package p2p

import (
	"errors"

	"github.com/libp2p/go-libp2p/p2p/net/swarm"
)

// Unreachable reports whether err says that a peer could not be dialled at
// all: it has no known address, or every address failed. Such a peer is
// not refusing anything; nobody is there. A refusal, a reset or a timeout
// after the stream opened is not unreachability.
func Unreachable(err error) bool {
	var de *swarm.DialError
	return errors.As(err, &de) ||
		errors.Is(err, swarm.ErrNoAddresses) ||
		errors.Is(err, swarm.ErrNoGoodAddresses) ||
		errors.Is(err, swarm.ErrAllDialsFailed) ||
		errors.Is(err, swarm.ErrDialBackoff)
}
