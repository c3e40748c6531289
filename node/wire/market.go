package wire

import (
	"errors"
	"fmt"

	"github.com/e31network/e31/market"
	"github.com/e31network/e31/p2p"
	"github.com/libp2p/go-libp2p/core/peer"
)

// ErrOutOfScope marks a message published on the topics of a class market
// (or subshard of one) that does not belong there: an offer of another
// class's boxes, or of a provider of another subshard, or a declaration
// that names another market. It counts as invalid: every honest peer
// derives the scope of such a message alike, so none forwards it.
var ErrOutOfScope = errors.New("out of this market's scope")

// checkClassShard checks a market a declaration names: a class market or
// a subshard of one.
func checkClassShard(s p2p.Shard) error {
	if err := s.Valid(); err != nil {
		return err
	}
	if _, err := market.ParseClass(s.Class); err != nil {
		return err
	}
	return nil
}

// sameScope reports whether a and b are the same part of the market.
func sameScope(a, b p2p.Shard) bool {
	return a.Class == b.Class && a.Index == b.Index && max(a.Count, 1) == max(b.Count, 1)
}

// OfferValidator is the body validator of the offers topic of scope:
// ValidateOffer, and in a class scope CheckOfferScope too.
func OfferValidator(scope p2p.Shard) p2p.BodyValidator {
	if scope.Class == "" {
		return ValidateOffer
	}
	return func(s p2p.Signed) error {
		if err := ValidateOffer(s); err != nil {
			return err
		}
		b, err := DecodeOffer(s)
		if err != nil {
			return err
		}
		return CheckOfferScope(b, s.Signer, scope)
	}
}

// CheckOfferScope refuses an offer, signed by signer, on the offers topic
// of a class scope when its GPUs (as DecodeOffer gives them) are not of
// the scope's class or its signer's subshard of the class
// (p2p.ClassShardOf) is not the scope's: a provider's market is derived
// from what it offers and who it is, never chosen, so that no crowd of
// identities can pick one subshard to take over its Match. Outside a
// class scope it accepts any offer.
func CheckOfferScope(b OfferBody, signer peer.ID, scope p2p.Shard) error {
	if scope.Class == "" {
		return nil
	}
	if c := market.ClassOf(b.Offer.GPUs); string(c) != scope.Class {
		return fmt.Errorf("%w: offer of class %s on the offers topic of class %s", ErrOutOfScope, c, scope.Class)
	}
	if own := p2p.ClassShardOf(signer, scope.Class, max(scope.Count, 1)); own.Index != scope.Index {
		return fmt.Errorf("%w: offer by %s, of subshard %s, on the offers topic of %s", ErrOutOfScope, signer, own, scope)
	}
	return nil
}

// CheckMarket refuses a declaration on the jobs topic of a class scope
// unless it names that scope as its market (DeclarationBody.Market).
// Outside a class scope it accepts any declaration, as peers that know
// nothing of class markets do.
func CheckMarket(b DeclarationBody, scope p2p.Shard) error {
	if scope.Class == "" {
		return nil
	}
	if b.Market == nil {
		return fmt.Errorf("%w: a declaration names no market, on the jobs topic of %s", ErrOutOfScope, scope)
	}
	if !sameScope(*b.Market, scope) {
		return fmt.Errorf("%w: a declaration for market %s, on the jobs topic of %s", ErrOutOfScope, *b.Market, scope)
	}
	return nil
}
