// Package digest is the network-wide digest topic as a node takes part in
// it: each shard's market in a few hundred bytes, published about once a
// DigestEvery by one member of the shard, so that any peer reads the shape
// of the whole market, every shard's, for a few KB/s.
//
// Build summarises a node's view of its shard (pure); Order and Decide say
// which member publishes (the first in an order every peer derives alike
// from the round and the members' IDs, the second when the first is
// silent); Book keeps the latest digest of each shard and refuses what
// comes too often; Publisher is the loop that publishes this node's turn.
package digest
