// Package scale is scale-bench: what one real e31d pays in a network far
// larger than this machine could run. The near network is real, the far one
// simulated: the daemon (an observer, as every peer is) is reached through
// as many real gossipsub peers as a peer's mesh holds, which carry a
// synthetic network of providers and jobs with real keys in the real wire
// format, each unique message arriving once from each of them, as it
// arrives from a mesh. The daemon is the code users run, unchanged.
//
// It measures the daemon's gossip bytes in and out (e31_gossip_bytes_total),
// its CPU and RSS (/proc), its epoch passes' Match and cut times (GET
// /v1/matches), the copies of each message that reach it, the share of
// unique messages its per-peer limits let through, and how long a silent
// provider stays in its view, and prints beside each what the cost model
// predicts (model.go: the model of 2026-12-03, its measured inputs and
// assumptions, one peer's cost against the network's size).
//
// The far network's jobs are declared, leased by one of its providers (a
// lease announcement signed by both) and released, and the network may be
// split into shards, of which the daemon hears its own. Beside the daemon
// runs a second real one in its shard, a provider whose devices no far job
// asks for; the daemon submits jobs of its own that only that provider can
// take (probe.go), so that the lease protocol runs between two real
// daemons inside the far network's load, and counts the matching rounds it
// loses on them (e31_match_rounds_lost_total).
package scale
