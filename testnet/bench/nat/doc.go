// Package nat measures leases and staging behind NAT, `sudo go run
// ./testnet nat-bench`: real e31d processes run on the small internet of
// network namespaces that testnet/netns builds, a bootstrap peer serving as
// a relay that carries data on the public side, a submitter behind a
// dropping router and a provider behind each kind of router in turn
// (netns.Routers: dropping, rejecting, symmetric, filtering); then the same
// two daemons on 127.0.0.1, no NAT at all, the baseline.
//
// For each it submits a job staging an input the moment both home daemons
// have started, and reports the time from then to the lease, the data path
// the job's status reported (direct, or relayed-data through the relay
// where no hole was punched), and the staging throughput: the staging
// phase of the job's final receipt. [Check] says whether this machine can
// run it.
package nat
