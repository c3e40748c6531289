// Package gravity measures what moving one dataset to many jobs costs
// (issue 14), `go run ./testnet gravity-bench`, with and without the
// data-gravity features: many sources, staging before the lease and
// locality in Match.
//
// For each configuration ([Configs]: the baseline with every feature off
// by its flag, the defaults, and the defaults with --locality-wait) it
// starts a fresh network of real e31d processes on 127.0.0.1: one
// submitter whose uploads are capped and a few providers. The submitter
// submits one-GPU jobs that all read the same dataset, evenly over a span.
// The figures are the bytes the submitter sent (in datasets), the bytes all
// providers fetched (against dataset × providers used) and the median time
// from rent to run, from the jobs' own step times, each held against the
// issue's goal and the baseline's figure.
package gravity
