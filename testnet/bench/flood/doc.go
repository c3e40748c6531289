// Package flood measures what a Sybil and an invalid-message flood cost
// honest daemons (issue 16), `go run ./testnet flood-bench`: honest jobs
// run twice on real e31d processes on 127.0.0.1, once on a quiet network
// and once while two flooding peers (testnet/byzantine/flood) run, one
// publishing valid declarations from fresh identities, one mixing those
// with invalid and oversized messages.
//
// The figures are the honest jobs completed and how much longer they took,
// how many of each flooder's messages spread (an observer connected only
// to the daemons counts them), whether the mixed flooder was graylisted,
// and the CPU the honest daemons spent on the flood: their /proc/PID/stat
// CPU over the flood less that of a quiet interval of the same length.
// testnet/e2e's TestByzantineFlood runs [Measure] small and checks them.
package flood
