// Package speed measures the figures of E31's speed goals (issue 12) in one
// run, `go run ./testnet bench`, and gives each beside the baseline it is
// held against, measured in the same run on the same machine, so that a
// figure means the same thing on a laptop and on a loaded build server.
//
// Two kinds of figures come together here:
//
//   - Micro figures come from the packages' own Go benchmarks (market's
//     Match, ledger's receipts, content's staging), run as `go test -bench`
//     subprocesses. [ParseGoBench] reads their output; a figure is found by
//     its metric unit ("receipts/s", "MiB/s", "ns/op"), not by benchmark
//     name alone, because the benchmarks are rewritten as the code behind
//     them is, and a unit that is missing is an error that names the
//     benchmark, never a silent zero.
//   - Daemon figures come from real e31d processes on 127.0.0.1 started with
//     testnet/cluster, running trivial jobs (`true` on the host's system
//     directories) in real runc sandboxes: idle-network latency, throughput
//     of 200 jobs from 10 submitters (each submitting its next job when its
//     last has ended, so that a job's submit -> released time is its own
//     turn rather than its place in a queue of 200), memory growth and deep-queue
//     throughput. Job timings are the daemons' own step times (api.Job.Steps),
//     so the polling here only paces the run.
//
// Throughput is reported against the sandbox-bound limit of this machine:
// cores ÷ CPU-seconds of one bare `runc run` of the same job's bundle (see
// [MeasureSandboxLimit]), because a network that does nothing but start
// sandboxes can go no faster, and the ratio travels between machines where
// jobs/s does not.
//
// With a profile directory, every daemon serves /debug/pprof/ and a CPU
// profile of each is taken during the throughput load; [Attribute] splits
// the merged samples into the phases a job goes through by the package of
// the leaf-most frame that names one, so the table says what one job costs
// where (CPU-ms per job), and what is not the sandbox.
//
// Every figure is a row of a bench.Table (package testnet/bench, the kit
// the benchmarks share): measured value, baseline, ratio, goal and verdict.
package speed
