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
// Not yet simulated: leases and releases in the far network, so matching
// rounds lost are not measured; a multi-hop run of real hosts that would
// check the copies and delays the near network assumes.
package scale
