// Package wire is what E31 peers say to each other: the kinds and bodies of
// gossip messages (offers; declarations, withdrawals, leases, releases and
// requeues on the jobs topic), the lease that both parties sign, the
// request and reply of each direct-stream protocol, with their refusal
// codes, and the stateless checks that every body passes before it is
// believed. Checks that need what a node has seen (is this withdrawal signed
// by the job's submitter?) live in node/view.
//
// Every decoder here reads input from strangers; each has a fuzz test.
package wire
