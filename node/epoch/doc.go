// Package epoch runs Match for a node and carries out what it decides.
//
// market.Match is a pure function: a view goes in, a Result comes out
// (market/doc.go). This package is the node's side of it, in three parts:
//
//   - Clock numbers the epochs and gives each the delay its view is cut
//     with: the configured one, or the one every peer derives alike from
//     the gossip delays the offers announce (view.DelayRule).
//   - Loop runs Match once an epoch, on the view frozen at the epoch's
//     start minus its delay, the view every peer matches alike; FastPath
//     runs it between epochs, on the view as it stands, whenever a job or
//     free GPUs arrive (straight to rent, market/doc.go).
//   - Carry carries out a Result through Actions, in the order its doc
//     states, as raft's Ready states the order its caller must act in:
//     the records first (why jobs wait, which provider is reserved, the
//     staging that a reservation allows, the Match itself), the proposals
//     that other peers act on last. Both loops and the epoch benchmark
//     (testnet/bench/epoch) carry out every Result through it; only the
//     Actions differ.
//
// History keeps the recent Results for GET /v1/matches.
//
// A view is made of what peers sent, so a panic in one pass is recovered
// there and fails that pass only: it is logged as "panic recovered" with
// its stack and counted under PanicMatch, and the loop goes on with the
// next epoch.
package epoch
