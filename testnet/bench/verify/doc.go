// Package verify measures what checking results costs and how often a
// spot check catches a liar, `go run ./testnet verify-bench`, on one
// testnet of real e31d processes on 127.0.0.1 (simulated GPUs):
//
//   - cost: the same array of short tasks submitted with no verification,
//     with verify.spot and with verify.replicas: 2, on honest providers
//     only (the arrays ask for the honest providers' GPU model), each with
//     its wall time (submit to the array's release, which waits for its
//     checks) and the GPU-hours its leases held (api.Held: GPUHours and
//     VerificationGPUHours), each beside the unverified array's;
//   - catch: with one provider that returns an empty output without
//     running anything (e31d --misbehave no-work, a byzantine build, of
//     another GPU model) among the honest ones, an array at each spot
//     rate s, each from a submitter of its own so that no catch carries
//     over: k, the tasks the liar returned, the checks drawn on them, and
//     whether it was caught, beside the binomial model's s·k expected
//     checks and P(caught) = 1-(1-s)^k;
//   - model: the binomial model against draws of its own, a seeded
//     math/rand drawing each of k tasks with chance s, many trials: the
//     share of trials in which a liar is caught, beside 1-(1-s)^k.
//
// The network catches a liar in one more way than the model counts: a
// check of an honest provider's task that lands on the liar goes against
// the liar too (a third run decides), and every task it returned runs
// again. The report counts those checks apart.
package verify
