// Package nat measures leases and staging behind NAT, `sudo go run
// ./testnet nat-bench`: real e31d processes run three ways, one after
// another, on the small internet of network namespaces that testnet/netns
// builds:
//
//   - hole-punched: a bootstrap peer serving as a relay on the public side,
//     a submitter behind one NAT and a provider behind another;
//   - relayed: the same, with the provider's router filtering everything
//     but the bootstrap peer, so that no hole can be punched and the
//     lease's control streams go through the relay;
//   - loopback: the same two daemons on 127.0.0.1, no NAT at all.
//
// For each it reports the time from the provider's start to its first
// lease (a small job, submitted before the provider starts, waits for it)
// and, where a direct path exists, the staging throughput of an input: the
// staging phase of the job's final receipt. A relayed path carries no
// data, so it has no throughput figure. [Check] says whether this machine
// can run it.
package nat
