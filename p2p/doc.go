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
// A handler given to Serve and the validators of a topic run on whatever
// any peer sends, in goroutines that libp2p and pubsub start without
// recovering. A panic in one fails only that request (answered "internal
// error" with CodeInternal) or that message (ignored, not rejected: the
// bug is ours, not the forwarder's), is logged at error level with its
// stack, and is told to the node's hook (OnPanic, GossipConfig.Panicked),
// which counts it. It is a safety net for bugs, never a way to refuse: a
// refusal is an error the handler returns, or a validator's rejection.
//
// # Peers that misbehave
//
// The validators decide what a message is worth; gossipsub v1.1's peer
// scoring decides what its sender is worth. NewGossip always turns scoring
// on (GossipConfig.Guard, or a default Guard), with the parameters of
// ScoreParams, chosen after those of Lotus and the Ethereum clients:
//
//   - P4, invalid messages: every payload a validator rejects costs its
//     forwarder 100 × n² for n rejections, decaying to 1% over 30 minutes.
//     Five cost 2,500; the sixth takes any peer below GraylistThreshold
//     (-2,500), whatever good record it had, since what good behaviour can
//     add is capped at +50 (P1, time in the mesh, up to +10 a topic over an
//     hour; P2, first deliveries, up to +20). A graylisted peer's RPCs are
//     dropped unread, its valid messages included, until the penalty
//     decays; it keeps its score across reconnects for an hour.
//   - Reject and Ignore: a validator returns Reject only for what the
//     forwarder could have checked itself (oversized, malformed, unsigned,
//     forged, a body its own validator refuses), and Ignore for what may be
//     nobody's fault: stale (clocks drift, paths differ) and replayed (the
//     same envelope by two paths). Only Reject feeds P4. A release or lease
//     judged against this node's view (node/view) may in rare races be
//     rejected by one peer and accepted by another; one such penalty costs
//     100 and decays, far from any threshold.
//   - Thresholds: below GossipThreshold (-500, three invalid messages) a
//     peer gets no gossip from us; below PublishThreshold (-1,000) our own
//     messages are no longer flood-published to it (flood publishing, which
//     we keep on so that an offer reaches every peer at once, is what
//     limits it to peers above that threshold); below GraylistThreshold it
//     is ignored. Peer exchange is taken only from peers at or above
//     AcceptPXThreshold (+5), which a fresh identity has not earned.
//   - P3 (mesh delivery quotas) is off: our topics are quiet for long
//     stretches and a quota would punish honest peers for others' silence.
//   - P6, IP colocation: past 10 peers on one address, each further one
//     costs 50 × excess². Loopback is exempt (LoopbackNets): every peer of
//     a testnet on one machine shares 127.0.0.1, and tests and honest
//     testnets must never be penalised for it. On the Internet, many
//     identities behind one address is what a cheap Sybil looks like.
//   - P7: broken IWANT promises and early re-grafts, six free, then
//     10 × excess², so a peer that drops the odd promise under load is not
//     hurt.
//
// Scoring needs invalid messages to act; a flood of valid ones needs a
// limit. Guard keeps a token bucket per sending peer and topic
// (DefaultLimits: offers 200/s with a burst of 400, jobs 100/s with a burst
// of 300) and drops what exceeds it from the incoming RPC, in pubsub's
// event loop, before any signature is checked or validation queued: a
// flood costs a map lookup per message, not an Ed25519 verification, and
// cannot fill the validation queue that honest messages wait in. The
// limits must cover the whole network's traffic, not one peer's, since an
// honest peer forwards everyone's: an offer heartbeat from 200 providers
// at one a second, and far fewer jobs messages. A dropped message is not
// marked seen, so an honest copy from another peer is still delivered, and
// a drop costs the sender no score: the limit slows, P4 punishes.
// Drops are counted by topic and reason (Guard.Limited, the node's
// e31_gossip_limited_total), peers by score band (Guard.ScoreCounts,
// e31_gossip_peers).
//
// A Sybil floods the jobs topic with valid declarations from many fresh
// identities, each with a clean score, and each first in Match's order
// (a submitter with no recent use has the smallest share). What bounds it:
//
//   - New submitters per forwarder (GuardConfig.Declarations and
//     NewSubmitters): a declaration or re-announcement that the validator
//     accepted, signed by an identity this node has not admitted before,
//     costs the forwarding peer a token; one a second, ten at once, by
//     default. Without one it is ignored (not rejected: the forwarder may
//     be honest, passing on what it could not judge), and an honest
//     submitter's next re-announcement tries again. Identities admitted
//     are remembered for an hour (at most 100,000). The check runs after
//     the validator, so invalid declarations cannot drain an honest
//     forwarder's bucket; the flooder's own links carry at most that many
//     new identities, however many keys it makes, and an honest forwarder
//     passes on only what it admitted.
//   - The message rate per forwarder above, for everything else.
//   - A provider whose proposal cannot reach the submitter at all (no
//     address, every dial failed: Unreachable) drops the job from its view
//     until the submitter announces it again, so an identity nobody can
//     reach costs each provider one failed proposal, not one per pass.
//   - P6 above, for many hosts behind one address.
//   - node/view bounds the open jobs of one submitter identity and drops an
//     open job that is not re-announced (every few heartbeats): a flood's
//     jobs leave every view ten heartbeats after it stops (100 s at the
//     default heartbeat).
//   - market.Match serves jobs past the starving age first, so honest jobs
//     that waited keep their place ahead of a later flood.
//
// What is left: an identity admitted once may re-announce its jobs within
// the message rate, each re-announcement costing each provider another
// failed proposal; and a Sybil that lists addresses which swallow dials
// holds a provider's GPUs for a dial timeout per proposal.
//
// TestByzantineInvalidPublisherGraylisted and
// TestByzantineHonestHighRateNotGraylisted show scoring at work between
// real hosts; testnet/e2e's TestByzantineFlood runs daemons under a flood
// from testnet/byzantine/flood.
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
//     little for bulk data, which must wait for a direct path; unless the
//     relay sets no limit (PathRelayedData).
//   - HolePunch runs DCUtR: when a peer arrives through a relay, both sides
//     exchange the addresses their NATs gave them and dial each other at the
//     same moment, which opens a direct connection through most NATs that
//     keep a port per socket. OnHolePunch reports each outcome. Where the
//     punch fails (a firewall that admits nothing unasked, a NAT that picks
//     a new port per destination), the relayed connection stays the only
//     one; PeerPath tells a caller which it has.
//   - RelayService serves as a relay for others while the host is public,
//     within RelayLimits. A relay that should carry bulk data too is given
//     no limit on its circuits by its operator (RelayLimits.Data < 0), and
//     bounded by CircuitsPerDay and byte budgets instead: libp2p marks a
//     circuit with any limit as limited, and bulk transfers refuse limited
//     connections.
//
// # Whom a relay serves
//
// The relay service is E31's own (relayservice.go), speaking circuit relay
// v2 as go-libp2p's does, so that every libp2p client is served unchanged,
// but deciding each reservation and circuit apart (relayGate): go-libp2p's
// gives every circuit one limit and any peer a slot. The node tells it who
// belongs (RelayPeers): a slot only for a member of the network, a circuit
// only between two members. A member's reservation that comes before
// anything it signed (a node behind a NAT asks the moment it starts) is
// held open up to ReserveWait for the node to see it, and a refused client
// asks again after RelaySlotRetry. On a relay that carries data, a circuit
// between members is unmarked, and the relay judges its bytes as they come:
// while its ends are Paired (a live lease's parties, a gang's parts) they
// are data, counted against the byte budget of each end's peer and address
// prefix (relayBudgets), and the circuit is cut once one is spent; while
// they are not, the circuit carries what a limited one would, then holds
// its next bytes unread for PairWait (a lease's announcement may trail its
// first data) and is cut if no lease comes. It cannot be marked limited
// and lifted later: libp2p keeps one
// connection to a peer and opens no second circuit while one is up, so the
// circuit a proposal opened before its lease existed is the one the
// lease's data will take. A peer whose budget is spent gets limited
// circuits until its window ends. TestRelayDataOnlyBetweenALeasesParties
// and the tests beside it show each case between real hosts.
//
// TestNATHolePunchGoesDirect and TestNATFilteringRouterKeepsRelay build two
// masquerading home networks and a relay in network namespaces and show
// both outcomes.
package p2p
