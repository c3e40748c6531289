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
//
// Any member of a shard, any peer whose ID hashes into it, can sign the
// shard's digest, and a liar's digest of free boxes (or of none) steers
// where submitters route jobs. So the Book keeps of each shard the digest
// of the best-ranked signer of the current round (Admit): one from a
// signer that Order ranks before the held one's, of the same round,
// replaces it at once; one ranked after is refused until the held one is
// Every old (when the successor may speak). A member that publishes a
// moment before the round's first is replaced by the first's, and the
// first publishes over it (Decide) rather than fall silent. A node that
// is a member of the shard also refuses a digest of it from a signer
// whose offer it does not hold: the members alone hear the shard's
// offers, and they do not forward a stranger's digest (node/digestgate.go).
//
// What this does not prevent: a Sybil with many IDs in a subshard holds
// the digest in the rounds where one of its IDs ranks first; a signing
// time may run p2p's MaxSkew (30 s) ahead, into the next round, until
// that round's first publishes; when the first is silent, a later-ranked member that
// publishes each round keeps the second from stepping in; peers outside
// the shard cannot check its membership. The damage is bounded: a digest
// only steers routing, a job that waits past market.MoveAfter is moved,
// and Match and the claims of a provider never trust a digest.
package digest
