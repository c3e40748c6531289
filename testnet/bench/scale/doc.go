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
//
// In a class network (scale-bench --classes: classnet.go, classdriver.go,
// classmeasure.go) the far network is the market simulation's mix of boxes
// (market_trace.go), each provider in the subshard of its class that its
// peer ID picks, every class in as many subshards as keep each at or
// below p2p.ShardProviders (the daemon is told the same, e31d --market
// classes --class-shards), each offer listing held CIDs, and each
// subshard's digest published once a minute by the member every peer
// elects. The neighbours join every topic of the far network, and the
// driver makes the messages of those the daemon has joined, the only
// ones gossipsub sends it: the daemon pays for exactly its own topics. It
// is measured in a role (--role): a provider of one 8×H100 box, which
// hears its subshard and the digests, or a peer that only submits, which
// keeps jobs open, routes them on the digests and hears the markets it
// follows for them. Each figure is printed beside the role's goal, and
// runs side by side with --table (classreport.go).
//
// The market simulation (market.go, scale-bench --market) measures what
// the cost report cannot: what splitting the market costs the jobs. It
// replays one seeded trace (market_trace.go: the mix of consumer
// cards, A100/H100 boxes, 8×H200 and a rare 8×B200; one-hour jobs at a
// set load of each pool, from Zipf-skewed submitters, with gangs, arrays,
// any-GPU jobs and jobs whose dataset ten providers hold) in three
// designs side by side: hash shards (p2p.ShardOf of providers and
// submitters), class shards (market.ClassOf, hash subshards as
// p2p.SuggestShards splits a large class, jobs routed by market.Route on
// digests published every minute and moved by market.Move), and one
// market. No daemon runs: each market (market_shard.go) is the real
// market.Match every 10 s on a View assembled as node/view assembles one,
// its assignments carried out as leases that end when the job has run.
// The report (market_report.go) gives per class of job the share that
// waited, p50/p90 wait, the jobs their market could never hold and the
// share stranded (waited while a fitting box was free somewhere), beside
// the goals.
package scale
