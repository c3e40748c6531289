package ledger

import (
	"encoding/binary"
	"errors"

	"github.com/libp2p/go-libp2p/core/peer"
)

// A final receipt may name the relay its lease's data moved through
// (Receipt.Relay): where no hole could be punched between the parties, a
// relay whose operator lets it carry data carried the staging, the output
// and the checkpoints, and both parties sign that it did.

// appendSeenAndRelay appends the GPUs seen, as appendGPUsSeen does, and
// after them the relay when set: then the count of GPUs seen is written
// even when zero, so that no receipt without a relay encodes like one with.
func appendSeenAndRelay(b []byte, gs []GPUSeen, relay peer.ID) []byte {
	if relay == "" {
		return appendGPUsSeen(b, gs)
	}
	b = binary.AppendUvarint(b, uint64(len(gs)))
	for _, g := range gs {
		b = appendString(b, g.UUID)
		b = appendString(b, g.Model)
	}
	return appendString(b, string(relay))
}

// relayText is the relay as JSON names it.
func relayText(p peer.ID) string {
	if p == "" {
		return ""
	}
	return p.String()
}

func validateRelay(r *Receipt) error {
	switch {
	case r.Relay == "":
		return nil
	case !r.Final:
		return errors.New("relay: only a final receipt says how the lease's data moved")
	case r.Relay == r.Provider || r.Relay == r.Submitter:
		return errors.New("relay: a party to the lease is not its relay")
	}
	if _, err := peer.IDFromBytes([]byte(r.Relay)); err != nil {
		return errors.New("relay: not a peer ID")
	}
	return nil
}
