// Package rogue is a stranger that cheats an E31 network from inside it,
// for tests and benches only: no daemon imports it. It plays the attacks
// of issue 51 ("Strangers cannot cheat") against real daemons.
//
// A Rogue is a real libp2p host on 127.0.0.1 with a fresh identity, built
// from the project's own parts: p2p for the host, its gossip (signed
// envelopes, the network's topics) and its direct streams (p2p.Call,
// p2p.Serve); node/wire for every body; ledger for receipts; content for
// the DAGs it serves and fetches. None of the daemon's honesty comes with
// them: a Rogue sends whatever an attack needs, and believes nothing it is
// told but what it measures.
//
// As a provider it publishes a signed offer, with heartbeats, of whatever
// GPUs it says it has (Offer), watches the jobs topic for declarations
// (WaitJob), and proposes leases over /e31/lease/1 with the terms it
// chooses (Propose). A lease the submitter countersigns is a Lease, over
// which it sends events, receipts and outputs as it pleases. It gets a
// genuine lease the way any provider does: by being the only one that
// fits, a job asking for a GPU model only it offers, so that every Match,
// the submitter's own included, assigns the job to it. As a submitter it
// declares jobs (Declare) and answers the providers that take them as a
// SubmitterPolicy says: countersign or not, send the gang lease or not.
// With Config.Relays it reserves relay slots, opens circuits and pushes
// bytes through them (AbuseRelay), beside a stranger that never joined.
//
// Each attack is a method that carries the attack out and returns a
// Result: what each request was answered (countersigned, refused and with
// which refusal code of node/wire, disputed), and the figures that say
// what it won (GPU-hours countersigned, bytes obtained, time GPUs were
// held). A Result never judges; the tests and testnet/bench/rogue compare
// it with what the defences must make of it. An attack that could not be
// carried out (no declaration seen, no lease to attack) returns an error,
// so that a harness fault never passes for a defence.
package rogue
