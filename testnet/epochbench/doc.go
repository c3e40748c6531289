// Package epochbench measures how many matching rounds a network loses
// because its peers' views of an epoch differ, over links with WAN latency.
//
// Every peer runs Match once an epoch on its own view, cut at the epoch's
// start minus the epoch delay, and a provider proposes only what its own
// Match gave it (market/doc.go, "Claims"). When a provider's view lacks a
// job that the submitter's view holds, the job waits an epoch although some
// provider could have taken it: a lost round.
//
// Run builds, in one process, a few peers with real libp2p hosts on
// 127.0.0.1, each pair joined through a delay line that holds every byte
// for a fixed one-way latency (delayline.go; go-libp2p's mocknet has a
// Latency option, but its streams carry one write per latency, so a busy
// gossip stream queues and the queue, not the latency, is what gets
// measured). On them run the real pieces of a node that decide what each
// peer sees: gossipsub through p2p.Gossip, the offer and market views of
// node/view with their epoch cut, the delay window and rule, and
// market.Match. Providers claim what their Match gives them by announcing a
// lease on the jobs topic (signatures and the direct proposal stream are
// left out: they do not change who sees what when).
// Submitters declare jobs at random instants. A round is lost when, in some
// epoch, the submitter's Match assigned its job to a provider, no provider
// claimed the job in that epoch, and none had before.
//
// The kernel here has no netem, so this is how latency is shaped. It is a
// measurement (go run ./testnet epoch-bench); the package's test only
// checks that the adaptive delay loses fewer rounds.
package epochbench
