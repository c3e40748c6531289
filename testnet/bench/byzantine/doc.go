// Package byzantine measures what byzantine providers cost honest jobs,
// `go run ./testnet byzantine-bench`: the same batch of one-GPU jobs runs
// twice from one submitter, on real e31d processes on 127.0.0.1: on honest
// providers only, then on the same network with one more provider per
// misbehaviour, each running an e31d built with the byzantine tag.
//
// The figures are, for each batch, the jobs completed of those submitted,
// the time from the first submission to the last release, the mean and
// slowest job (submission to release), the extra time the byzantine
// providers cost, and how many jobs ended up avoiding each of them. The
// daemons' timings are those of TestByzantineProviders (testnet/e2e), from
// which every defence's bound derives.
package byzantine
