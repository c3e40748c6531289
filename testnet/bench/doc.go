// Package bench is the measuring kit that testnet's benchmarks share; each
// benchmark is a package of its own under testnet/bench/<name>, and
// `go run ./testnet <name>-bench` (or `bench`, `measure`) only parses its
// flags and calls it:
//
//	speed      the speed goals' figures beside their in-run baselines (bench)
//	measure    convergence, gossip latency, memory and lease latency (measure)
//	image      image import, cold and warm starts, disk, checkpoints (image-bench)
//	epoch      matching rounds lost to differing views at WAN latency (epoch-bench)
//	nat        leases and staging behind NAT, in network namespaces (nat-bench)
//	flood      honest jobs under a Sybil and an invalid-message flood (flood-bench)
//	byzantine  honest jobs among byzantine providers (byzantine-bench)
//	gravity    one dataset moved to many jobs (gravity-bench)
//	verify     what checking results costs and catches (verify-bench)
//
// What is here is what more than one of them needs, and no goal of any:
//
//   - [Figure] and [Table]: one row per figure (measured value, in-run
//     baseline, ratio, goal, verdict), printed aligned for a terminal, as
//     markdown for docs/figures.md, or as JSON;
//   - [Env]: the work dir, the built binaries and the progress log a
//     benchmark on real daemons gets;
//   - [StartNetwork], [WaitIdle], [Submit], [TrivialJob], [JobWaiter],
//     [WaitAll], [WaitJob]: starting networks of real e31d processes on
//     127.0.0.1 (testnet/cluster) and following their jobs. Job timings
//     are the daemons' own step times (api.Job.Steps), so the polling here
//     only paces a run;
//   - [Spread], [VmRSS], [ReadProcCPU], [LoadAvg]: summaries of samples and
//     what /proc says of a process and of the machine.
//
// Nothing here holds state between calls: every option travels as a value.
package bench
