package wire

import (
	"crypto/sha256"
	"encoding/base32"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/e31network/e31/ledger"
	"github.com/e31network/e31/market"
	"github.com/e31network/e31/p2p"
	"github.com/ipfs/go-cid"
	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"
)

// Message kinds of the jobs topic.
const (
	KindDeclaration = "declaration"
	KindWithdrawal  = "withdrawal"
	KindLease       = "lease"
	KindRelease     = "release"
)

// DeclarationBody announces a job. Every data source is a CID by the time it
// is broadcast: local paths were imported by the submitter's node.
type DeclarationBody struct {
	Declaration market.Declaration `json:"declaration"`
	// Addrs is where the submitter's node can be reached for a proposal.
	Addrs []string `json:"addrs"`
	// ResumeOf names the job this one resumes from its checkpoint.
	ResumeOf string `json:"resume_of,omitempty"`
	// Market names the class market, or subshard of one, the job is
	// declared in, in a network split by class; absent otherwise. It is
	// signed with the rest: the jobs topic of any other scope refuses the
	// declaration (CheckMarket), so that no one can replay it into a
	// second subshard, where it would be leased a second time.
	Market *p2p.Shard `json:"market,omitempty"`
}

// WithdrawalBody withdraws a job; only its submitter's signature counts.
type WithdrawalBody struct {
	Job string `json:"job"`
}

// LeaseTerms are what both parties of a lease sign.
type LeaseTerms struct {
	ID          string          `json:"id"`
	Job         string          `json:"job"`
	Provider    string          `json:"provider"`
	Submitter   string          `json:"submitter"`
	GPUs        []string        `json:"gpus"` // UUIDs
	CPUs        int             `json:"cpus"`
	MemoryBytes uint64          `json:"memory_bytes"`
	Limit       market.Duration `json:"limit"`
	// Proposed is when the provider signed, in Unix ms; the lease's start
	// for reservations.
	Proposed int64 `json:"proposed"`
	// Expires is when an unanswered proposal lapses, in Unix ms.
	Expires int64 `json:"expires"`
	// The claim: which pass of Match chose this pair.
	Epoch    uint64 `json:"epoch"`
	ViewHash string `json:"view_hash"`
	Rank     int    `json:"rank"`
	// Bound is the rule that bounds the lease's held time,
	// ledger.BoundRule: from Proposed, less the clock skew, to Proposed
	// plus Limit and the allowances for grace, output and skew. Both
	// parties sign it, so the receipts' held time can be checked by
	// anyone against the terms. Zero on leases signed before the rule.
	Bound int `json:"bound,omitempty"`
	// Price is what an hour of one of the lease's GPUs costs, as the
	// provider's offer named it when it proposed: at most the job's
	// request.max_price, never more than the offer the submitter's Match
	// placed the job on. Zero on a free offer and on leases signed before
	// prices.
	Price market.Price `json:"price,omitempty"`
}

// LeaseDomain prefixes the terms in the bytes both parties of a lease
// sign.
const LeaseDomain = "e31-lease/1\n"

// SigningBytes are the bytes each party signs, domain-separated from every
// other signature a peer key makes.
func (t LeaseTerms) SigningBytes() []byte {
	b, _ := json.Marshal(t) // fixed struct: field order is stable
	return append([]byte(LeaseDomain), b...)
}

// Evidence is the lease as a third party checks it: the terms' bytes as
// both signed them, and both signatures (ledger.LeaseEvidence).
func (l *SignedLease) Evidence() ledger.LeaseEvidence {
	return ledger.LeaseEvidence{Terms: l.Terms.SigningBytes()[len(LeaseDomain):], ProviderSig: l.ProviderSig, SubmitterSig: l.SubmitterSig}
}

// SignedLease is a lease with both signatures: evidence, on its own, that
// both parties agreed.
type SignedLease struct {
	Terms        LeaseTerms `json:"terms"`
	ProviderSig  []byte     `json:"provider_sig"`
	SubmitterSig []byte     `json:"submitter_sig,omitempty"`
}

func (l *SignedLease) SignProvider(sk crypto.PrivKey) error {
	sig, err := sk.Sign(l.Terms.SigningBytes())
	if err != nil {
		return err
	}
	l.ProviderSig = sig
	return nil
}

func (l *SignedLease) Countersign(sk crypto.PrivKey) error {
	sig, err := sk.Sign(l.Terms.SigningBytes())
	if err != nil {
		return err
	}
	l.SubmitterSig = sig
	return nil
}

var ErrBadLeaseSig = errors.New("lease signature does not verify")

// verify checks the provider's signature, and the submitter's when both is
// set, using only the peer IDs named in the terms.
func (l *SignedLease) Verify(both bool) error {
	msg := l.Terms.SigningBytes()
	if err := verifyBy(l.Terms.Provider, msg, l.ProviderSig, ErrBadLeaseSig); err != nil {
		return fmt.Errorf("lease: %w", err)
	}
	if both {
		if err := verifyBy(l.Terms.Submitter, msg, l.SubmitterSig, ErrBadLeaseSig); err != nil {
			return fmt.Errorf("lease: %w", err)
		}
	}
	return nil
}

// verifyBy checks sig over msg by the peer whose ID's text is who, with
// the key the ID holds; bad, wrapped, says the signature does not verify.
func verifyBy(who string, msg, sig []byte, bad error) error {
	id, err := peer.Decode(who)
	if err != nil {
		return fmt.Errorf("names a bad peer ID %q: %w", who, err)
	}
	pk, err := id.ExtractPublicKey()
	if err != nil {
		return fmt.Errorf("peer %s: %w", who, err)
	}
	if !p2p.VerifySignature(pk, msg, sig) {
		return fmt.Errorf("%w (%s)", bad, who)
	}
	return nil
}

// market returns the lease as Match sees it.
func (l *SignedLease) Market() market.Lease {
	t := l.Terms
	return market.Lease{ID: t.ID, Job: t.Job, Provider: t.Provider, Submitter: t.Submitter, GPUs: t.GPUs, CPUs: t.CPUs, MemoryBytes: t.MemoryBytes, Start: t.Proposed, Limit: t.Limit}
}

// ReleaseBody announces that a lease ended and its GPUs are free.
type ReleaseBody struct {
	Lease     string   `json:"lease"`
	Job       string   `json:"job"`
	Provider  string   `json:"provider"`
	Submitter string   `json:"submitter"`
	GPUs      []string `json:"gpus"`
	// Outcome and Attribution are how the lease ended, as its final
	// receipt (or the one-sided record) says; a peer's values are not
	// checked against the ledger's vocabulary and pass through unchanged.
	Outcome     ledger.Outcome     `json:"outcome"`
	Attribution ledger.Attribution `json:"attribution"`
	// Held is the GPU time actually held, in ms: it refunds the charge made
	// at the lease announcement.
	HeldMs int64 `json:"held_ms"`
	At     int64 `json:"at"`
	// Requeued, from the submitter, says the lease never reached its run
	// and the job is back in the queue: peers open the job again when its
	// next announcement comes.
	Requeued bool `json:"requeued,omitempty"`
}

// JobID is the short printable form of a declaration envelope's hash.
func JobID(s p2p.Signed) string { return JobIDOf(s.Hash()) }

// JobIDOf is the ID of the job whose signed declaration hashes to h.
func JobIDOf(h [32]byte) string {
	return strings.ToLower(base32.StdEncoding.WithPadding(base32.NoPadding).EncodeToString(h[:10]))
}

// LeaseID derives a lease's ID from its job, provider and proposal time.
func LeaseID(job, provider string, proposed int64, nonce uint64) string {
	h := sha256.Sum256(fmt.Appendf(nil, "%s|%s|%d|%d", job, provider, proposed, nonce))
	return "l" + strings.ToLower(base32.StdEncoding.WithPadding(base32.NoPadding).EncodeToString(h[:9]))
}

// ValidateJobMessage is the body validator of the jobs topic. It checks what
// can be checked without state: structure, the declaration's rules, and that
// whoever a body names as its author is its signer.
func ValidateJobMessage(s p2p.Signed) error {
	switch s.Message.Kind {
	case KindDeclaration:
		var b DeclarationBody
		if err := s.Decode(&b); err != nil {
			return err
		}
		return b.Check()
	case KindWithdrawal:
		var b WithdrawalBody
		if err := s.Decode(&b); err != nil {
			return err
		}
		if b.Job == "" || len(b.Job) > 64 {
			return errors.New("withdrawal names no job")
		}
		return nil
	case KindLease:
		var b SignedLease
		if err := s.Decode(&b); err != nil {
			return err
		}
		if b.Terms.Provider != s.Signer.String() {
			return fmt.Errorf("%w: lease announced by %s names provider %s", p2p.ErrForged, s.Signer, b.Terms.Provider)
		}
		if err := b.Verify(true); err != nil {
			return fmt.Errorf("%w: %v", p2p.ErrForged, err)
		}
		return CheckTerms(b.Terms)
	case KindRequeue:
		_, err := CheckRequeue(s)
		return err
	case KindTaskBatch:
		_, err := CheckTaskBatch(s)
		return err
	case KindRelease:
		var b ReleaseBody
		if err := s.Decode(&b); err != nil {
			return err
		}
		if b.Provider != s.Signer.String() && b.Submitter != s.Signer.String() {
			return fmt.Errorf("%w: release signed by %s, a party to neither side", p2p.ErrForged, s.Signer)
		}
		if b.Lease == "" || len(b.GPUs) > MaxOfferGPUs {
			return errors.New("release names no lease")
		}
		return nil
	}
	return fmt.Errorf("unknown message kind %q on the jobs topic", s.Message.Kind)
}

func (b DeclarationBody) Check() error {
	if err := b.Declaration.Validate(); err != nil {
		return err
	}
	for i, in := range b.Declaration.Data {
		if _, err := cid.Decode(in.Source); err != nil {
			return fmt.Errorf("data[%d].source: a broadcast declaration names inputs by CID, not %q", i, in.Source)
		}
	}
	if a := b.Declaration.Array; a != nil && a.ValuesFile != "" {
		return errors.New("array.values_file: a broadcast declaration carries its values, not a file of them")
	}
	for i, s := range b.Declaration.Secrets {
		if s.From != "" {
			return fmt.Errorf("secrets[%d].from: a broadcast declaration names its secrets, not where their values are read", i)
		}
	}
	if img := b.Declaration.Work.Image; img != "" {
		if _, err := cid.Decode(img); err != nil {
			return fmt.Errorf("work.image: a broadcast declaration names its image by CID, not %q", img)
		}
	}
	if len(b.Addrs) > MaxOfferAddrs {
		return fmt.Errorf("declaration lists %d addresses, limit %d", len(b.Addrs), MaxOfferAddrs)
	}
	if m := b.Market; m != nil {
		if err := checkClassShard(*m); err != nil {
			return fmt.Errorf("declaration market: %w", err)
		}
	}
	return nil
}

func CheckTerms(t LeaseTerms) error {
	if t.ID == "" || t.Job == "" || t.Submitter == "" {
		return errors.New("lease terms incomplete")
	}
	if len(t.GPUs) > MaxOfferGPUs || t.CPUs < 0 || t.Limit <= 0 {
		return errors.New("lease terms out of range")
	}
	return nil
}
