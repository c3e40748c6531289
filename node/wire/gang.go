package wire

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/e31network/e31/market"
	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/protocol"
)

// A gang (market.Request.Nodes) runs as N parts on N providers. Each part
// is leased as a job of its own, signed by its provider and the
// submitter; once every part is, the submitter names them all in one
// GangLease, which each provider signs and then the submitter, and no
// part starts until its provider holds the gang lease with every
// signature: evidence, on its own, that all N were held together.

// ProtoGang: submitter → provider of a part, the gang lease to sign
// (GangRequest.Start unset; the reply carries the provider's signature),
// then, signed by all, to start on (Start set).
const ProtoGang protocol.ID = "/e31/gang/1"

// GangPart is one part of a gang lease.
type GangPart struct {
	Rank     int    `json:"rank"`
	Provider string `json:"provider"`
	// Lease is the part's own lease, both sign, under which its GPUs are
	// held and its receipts signed.
	Lease string `json:"lease"`
}

// GangLease names every part of a gang, in rank order.
type GangLease struct {
	Gang      string     `json:"gang"`
	Submitter string     `json:"submitter"`
	Parts     []GangPart `json:"parts"`
}

// SigningBytes are the bytes every party signs, domain-separated from
// every other signature a peer key makes.
func (g GangLease) SigningBytes() []byte {
	b, _ := json.Marshal(g) // fixed structs: field order is stable
	return append([]byte("e31-gang/1\n"), b...)
}

// SignedGangLease is a gang lease with the signatures gathered so far:
// each part's provider's, by rank, and the submitter's once all are in.
type SignedGangLease struct {
	Terms        GangLease `json:"terms"`
	ProviderSigs [][]byte  `json:"provider_sigs"`
	SubmitterSig []byte    `json:"submitter_sig,omitempty"`
}

// GangRequest asks a part's provider to sign the gang lease (Start unset),
// or gives it the lease signed by all, to start its part on.
type GangRequest struct {
	// Lease is the part's lease this provider holds.
	Lease string          `json:"lease"`
	Gang  SignedGangLease `json:"gang"`
	Start bool            `json:"start,omitempty"`
}

// GangReply carries the provider's signature of the gang lease.
type GangReply struct {
	ProviderSig []byte `json:"provider_sig"`
}

// ErrGang is wrapped by every error of a gang lease's checks.
var ErrGang = errors.New("bad gang lease")

// errBadGangSig says a signature of the gang lease does not verify.
var errBadGangSig = errors.New("a signature does not verify")

// Validate checks the request's shape, which needs no state: the gang's
// parts in rank order, each on a provider of its own under a lease of its
// own, and the part named by Lease among them. It checks no signature.
func (r GangRequest) Validate() error {
	g := r.Gang.Terms
	n := len(g.Parts)
	switch {
	case g.Gang == "" || len(g.Gang) > maxIDLen:
		return fmt.Errorf("%w: gang ID %q", ErrGang, g.Gang)
	case n < 2 || n > market.MaxNodes:
		return fmt.Errorf("%w: %d parts, want 2 to %d", ErrGang, n, market.MaxNodes)
	case len(r.Gang.ProviderSigs) > n:
		return fmt.Errorf("%w: %d provider signatures for %d parts", ErrGang, len(r.Gang.ProviderSigs), n)
	}
	if _, err := peer.Decode(g.Submitter); err != nil {
		return fmt.Errorf("%w: submitter %q: %v", ErrGang, g.Submitter, err)
	}
	providers, leases := map[string]bool{}, map[string]bool{}
	mine := false
	for i, p := range g.Parts {
		if p.Rank != i {
			return fmt.Errorf("%w: part %d has rank %d; parts go in rank order", ErrGang, i, p.Rank)
		}
		if _, err := peer.Decode(p.Provider); err != nil {
			return fmt.Errorf("%w: part %d's provider %q: %v", ErrGang, i, p.Provider, err)
		}
		if p.Lease == "" || len(p.Lease) > maxIDLen {
			return fmt.Errorf("%w: part %d's lease %q", ErrGang, i, p.Lease)
		}
		if providers[p.Provider] || leases[p.Lease] {
			return fmt.Errorf("%w: part %d shares its provider or lease with another part", ErrGang, i)
		}
		providers[p.Provider], leases[p.Lease] = true, true
		mine = mine || p.Lease == r.Lease
	}
	if !mine {
		return fmt.Errorf("%w: lease %s is no part of gang %s", ErrGang, r.Lease, g.Gang)
	}
	return nil
}

// maxIDLen bounds a job's or a lease's ID in a gang lease: they are short
// hashes, and a longer one is noise.
const maxIDLen = 128

// Part is the part of the gang under lease, if any.
func (g GangLease) Part(lease string) (GangPart, bool) {
	for _, p := range g.Parts {
		if p.Lease == lease {
			return p, true
		}
	}
	return GangPart{}, false
}

// SignProvider adds the signature of the provider of part rank.
func (l *SignedGangLease) SignProvider(sk crypto.PrivKey, rank int) error {
	if rank < 0 || rank >= len(l.Terms.Parts) {
		return fmt.Errorf("%w: no part %d", ErrGang, rank)
	}
	sig, err := sk.Sign(l.Terms.SigningBytes())
	if err != nil {
		return err
	}
	for len(l.ProviderSigs) < len(l.Terms.Parts) {
		l.ProviderSigs = append(l.ProviderSigs, nil)
	}
	l.ProviderSigs[rank] = sig
	return nil
}

// SignSubmitter adds the submitter's signature, last.
func (l *SignedGangLease) SignSubmitter(sk crypto.PrivKey) error {
	sig, err := sk.Sign(l.Terms.SigningBytes())
	if err != nil {
		return err
	}
	l.SubmitterSig = sig
	return nil
}

// VerifyProvider checks the signature of part rank's provider.
func (l *SignedGangLease) VerifyProvider(rank int) error {
	if rank < 0 || rank >= len(l.Terms.Parts) || rank >= len(l.ProviderSigs) {
		return fmt.Errorf("%w: no part %d", ErrGang, rank)
	}
	if err := verifyBy(l.Terms.Parts[rank].Provider, l.Terms.SigningBytes(), l.ProviderSigs[rank], errBadGangSig); err != nil {
		return fmt.Errorf("%w: %w", ErrGang, err)
	}
	return nil
}

// Verify checks every signature, each with the peer ID the terms name:
// every part's provider's, and the submitter's.
func (l *SignedGangLease) Verify() error {
	msg := l.Terms.SigningBytes()
	check := func(who string, sig []byte) error {
		if err := verifyBy(who, msg, sig, errBadGangSig); err != nil {
			return fmt.Errorf("%w: %w", ErrGang, err)
		}
		return nil
	}
	if len(l.ProviderSigs) != len(l.Terms.Parts) {
		return fmt.Errorf("%w: %d provider signatures for %d parts", ErrGang, len(l.ProviderSigs), len(l.Terms.Parts))
	}
	for i, p := range l.Terms.Parts {
		if err := check(p.Provider, l.ProviderSigs[i]); err != nil {
			return err
		}
	}
	return check(l.Terms.Submitter, l.SubmitterSig)
}
