// Package flood is a stranger that floods an E31 network's gossip, for
// tests and benches only: no daemon imports it.
//
// A Peer is a bare libp2p host running gossipsub on the network's two
// topics, under the same protocol IDs and topic names as package p2p, with
// none of p2p's validators: it publishes whatever it is told to, at a set
// rate. Each Kind is one misbehaviour of issue 16:
//
//   - Sybil (d): valid declarations, each signed by a fresh identity that
//     nobody can reach for a proposal. Every one passes every validator;
//     only per-peer rate limits and the view's bounds stand against them.
//   - Invalid (e): a bad signature, a malformed envelope, a body of the
//     wrong kind for its topic, in turn. Every one is rejected, and each
//     rejection lowers the Peer's gossip score until it is graylisted.
//   - Oversized (e): envelopes larger than p2p.MaxPayload (but within
//     gossipsub's own message limit, so that they reach the validators).
//
// Sent counts what was published by kind; how much of it was accepted is
// for the receivers to say (p2p.Guard, the daemons' metrics).
//
// Hoard is the flood of issue 51 that a view's bounds stand against
// (node/view, "Bounds"): a few fresh identities, each declaring as much
// as one submitter may hold in a view, single jobs (some of the largest
// size, shaped to cost the most memory) and arrays, in requeue messages,
// and re-announcing them.
package flood
