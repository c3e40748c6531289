package node

import (
	"fmt"

	"github.com/e31network/e31/node/digest"
	"github.com/e31network/e31/node/wire"
	"github.com/e31network/e31/p2p"
	"github.com/libp2p/go-libp2p/core/peer"
)

// digestGate is the digest topic's validator on a node: the book's, and
// before it, on a member of a shard, the refusal of a digest of that shard
// from a signer that is not among the members the node sees. Only the
// members hear a shard's offers, so only they can tell a member from a
// stranger whose ID merely hashes into the shard; they do not forward such
// a digest. Immutable after construction; the book and the offers view
// lock themselves.
type digestGate struct {
	book *digest.Book
	self peer.ID
	// own is the shard as digests name it, and member whether the node is
	// one of it; a node that is no member checks no membership.
	own    p2p.Shard
	member bool
	// offered reports whether the node's view holds an offer of provider.
	offered func(provider string) bool
}

// Validate refuses, as p2p.ErrUnwanted (views lag, so no penalty), a
// digest of the node's own shard by a signer other than the node that
// has no offer in its view; what is left is the book's to judge.
func (g digestGate) Validate(s p2p.Signed) error {
	if !g.member || s.Signer == g.self {
		return g.book.Validate(s)
	}
	if err := wire.ValidateDigest(s); err != nil {
		return err
	}
	b, err := wire.DecodeDigest(s)
	if err != nil {
		return err
	}
	if b.Shard == g.own && !g.offered(s.Signer.String()) {
		return fmt.Errorf("%w: digest of this node's shard %s by %s, which has no offer in its view", p2p.ErrUnwanted, b.Shard, s.Signer)
	}
	return g.book.Validate(s)
}

// digestMember is shard as digests name it, and whether a node of ID self
// that offers GPUs (offers) is a member of it: a provider placed in a
// shard by hand (e31d --shard) is no member by its ID.
func digestMember(self peer.ID, shard p2p.Shard, offers bool) (p2p.Shard, bool) {
	own := p2p.Shard{Class: shard.Class, Index: shard.Index, Count: max(shard.Count, 1)}
	return own, offers && wire.DigestShard(self, own) == own
}
