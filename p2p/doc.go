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
// check who said what, without trusting the peer that forwarded it. So the
// envelope's signature is the only one: pubsub runs with StrictNoSign and no
// author, each message is verified once, and a message's pubsub ID is the
// hash of its topic and bytes, so the seen-cache drops copies of the same
// bytes before any validator runs. The gossip validator rejects, and counts
// under a named reason, payloads that are oversized, malformed, unsigned,
// forged (the signature does not verify, or the body claims a peer other
// than the envelope's signer), stale (outside the age window) or replayed (a
// signer's nonce seen before inside that window, however re-encoded). The
// body itself is checked by a validator that the node supplies per topic,
// since only the node knows what a declaration or an offer must contain.
//
// # Reaching hosts behind NAT
//
// Most GPU contributors sit behind a home router, a campus firewall or a
// cloud NAT: they can dial out, but nobody can dial them. HostConfig's
// Reachability turns on what go-libp2p offers for that. Every switch is off
// in the zero value, and tests and the testnet on loopback keep it so: then a
// host never asks a router for a port, never dials or serves a relay, and
// sends nothing to an address it was not given.
//
//   - AutoNAT (v2) asks peers to dial each of the host's addresses back and
//     answers their requests in turn, so the host learns which addresses work.
//     AutoNATService also answers v1 requests while the host is public. The
//     host's verdict (public, private, unknown) arrives as
//     event.EvtLocalReachabilityChanged; HostReachability reads the latest.
//     Force fixes the verdict instead: ReachPublic for a bootstrap peer with
//     a public address, ReachPrivate for a host known to be behind a NAT.
//   - PortMap asks the router for a mapping over UPnP or NAT-PMP and
//     advertises the mapped address. Where the router offers it, the host
//     becomes public and needs nothing else.
//   - RelayClient dials and accepts connections through circuit relay v2
//     and, while the host is private, reserves a slot on each of
//     StaticRelays (the bootstrap peers) and advertises the relayed
//     addresses (/p2p/<relay>/p2p-circuit). A relayed connection is limited
//     by the relay (by default 128 KiB each way and 2 minutes): enough for
//     the control streams, which Call opens over such a connection, and too
//     little for bulk data, which must wait for a direct path.
//   - HolePunch runs DCUtR: when a peer arrives through a relay, both sides
//     exchange the addresses their NATs gave them and dial each other at the
//     same moment, which opens a direct connection through most NATs that
//     keep a port per socket. OnHolePunch reports each outcome. Where the
//     punch fails (a firewall that admits nothing unasked, a NAT that picks
//     a new port per destination), the relayed connection stays the only
//     one; PeerPath tells a caller which it has.
//   - RelayService serves as a relay for others while the host is public,
//     within RelayLimits. A relay that should carry bulk data too is given
//     larger limits (or none) by its operator.
//
// TestNATHolePunchGoesDirect and TestNATFilteringRouterKeepsRelay build two
// masquerading home networks and a relay in network namespaces and show
// both outcomes.
package p2p
