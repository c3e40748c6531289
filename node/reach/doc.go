// Package reach is how a node and its peers reach each other: whether the
// node runs NAT traversal and how (Traverse, Reachability), what its offer
// says of how to reach it (Offered), how it is connected to a peer and why
// only through a relay (Punches), and the addresses of the peers it has
// seen, learned from their offers and declarations, kept across restarts
// and dialled again after one (Book). It also tells the node's owner how
// peers reach it (Observe, Explain, Status: public, relayed through R, or
// unreachable with why and the fix; Teller logs each settled change), and
// finds the peers of its shard, naming a peer that is in no market the
// node takes part in and why: another network, another shard count, an
// older version (ShardMates, Mismatch).
//
// A node that listens on loopback alone (a test, the testnet) never runs
// NAT traversal: it must not send a packet beyond its addresses.
package reach
