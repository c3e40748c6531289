// Package measure starts real testnets on 127.0.0.1, one after another, and
// takes the network's basic figures, `go run ./testnet measure`:
//
//   - a gossip network of N nodes with 2 simulated GPUs and a 500ms
//     heartbeat: the time from the first process start until every node
//     sees every offer; each daemon's resident memory after 5s idle; and,
//     from sampling every node's view of offers, how long gossip takes to
//     bring an offer to each node and to the last of them;
//   - a job network of 10 nodes with 4 simulated GPUs and a 1s heartbeat,
//     once with the default epoch and once with 250ms: small jobs submitted
//     one after another, round-robin over the nodes, each after a random
//     pause under 1s so that submits fall anywhere in an epoch; the time
//     from submit to the signed lease, and from the release step until a
//     node other than the provider sees the GPU free again.
//
// Latencies come from the daemons' own step times; the figures depend on
// the machine's load, so the load average is reported with them.
package measure
