// Package cluster starts a local E31 network of real e31d processes on
// 127.0.0.1 for tests, benchmarks and the testnet command. Node 0 is the
// bootstrap peer of the others; every node gets simulated GPUs, a data dir
// under the cluster's dir and an API on a loopback port.
//
// Nothing a cluster starts listens beyond loopback, and mDNS, NAT port
// mapping and relays stay off, so a cluster never sends a packet off the
// machine.
package cluster
