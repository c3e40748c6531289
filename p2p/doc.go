// Package p2p is E31's network layer: a go-libp2p host with a persistent
// Ed25519 identity, bootstrap peers kept connected with backoff, gossipsub
// topics whose payloads are signed envelopes checked before they spread, and
// length-prefixed framing for the direct streams between the two parties of a
// lease.
//
// Gossip carries announcements that every peer must see (offers,
// declarations, withdrawals, lease and release announcements). Anything that
// concerns only two parties — proposing a lease, countersigning a receipt,
// handing over output — goes over a direct stream, so that a decision never
// depends on the timing of a broadcast.
//
// Every gossip payload is a libp2p signed envelope (core/record) around a
// Message. The envelope is evidence on its own: anyone holding its bytes can
// check who said what, without trusting the peer that forwarded it. The
// gossip validator rejects, and counts under a named reason, payloads that are
// oversized, malformed, unsigned, forged (the envelope's signer is not the
// gossip author, or the body claims another peer), stale (outside the age
// window) or replayed (a signer's nonce seen before inside that window). The
// body itself is checked by a validator that the node supplies per topic,
// since only the node knows what a declaration or an offer must contain.
package p2p
