package ledger

import (
	"bytes"
	"encoding/json"
	"fmt"
	"time"
	"unicode/utf8"

	"github.com/e31network/e31/market"
	"github.com/libp2p/go-libp2p/core/peer"
)

// leaseDomain is the prefix both parties of a lease sign the terms under
// (node/wire.go): the evidence is checked against the same bytes.
const leaseDomain = "e31-lease/1\n"

// maxLimit bounds a lease's limit as terms may state it: far past any
// job's, and small enough that the window it opens stays a time.Time.
const maxLimit = 10 * 365 * market.Day

// maxTermsLen bounds the lease terms a record carries; real terms are a few
// hundred bytes plus 40 per GPU.
const maxTermsLen = 8 << 10

// LeaseEvidence is a lease as both parties signed it: the exact bytes of
// the terms and the two signatures over "e31-lease/1\n" followed by them.
// A one-sided record carries it, so that a third party can check that the
// record's lease existed and that both parties agreed to it, with nothing
// but the peer IDs the terms name.
type LeaseEvidence struct {
	// Terms is the JSON of the lease terms, byte for byte as signed.
	Terms        json.RawMessage
	ProviderSig  []byte
	SubmitterSig []byte
}

// LeaseTerms are the fields of the terms that the ledger relies on.
type LeaseTerms struct {
	ID        string
	Job       string
	Provider  peer.ID
	Submitter peer.ID
	GPUs      int // how many GPUs the lease holds
	// CPUs and MemoryBytes are what the lease holds beside its GPUs.
	CPUs        int
	MemoryBytes uint64
	// Proposed is when the provider signed the proposal; Limit is the
	// job's declared limit, counted from it.
	Proposed time.Time
	Limit    time.Duration
	// Bound is the rule that bounds the lease's held time (BoundRule), 0
	// for terms signed before there was one (bounds.go).
	Bound int
}

// termsJSON reads only what the ledger needs; other fields of the terms
// are covered by the signatures and otherwise not the ledger's business.
type termsJSON struct {
	ID        string          `json:"id"`
	Job       string          `json:"job"`
	Provider  string          `json:"provider"`
	Submitter string          `json:"submitter"`
	GPUs      []string        `json:"gpus"`
	CPUs      int             `json:"cpus"`
	Memory    uint64          `json:"memory_bytes"`
	Proposed  int64           `json:"proposed"`
	Limit     market.Duration `json:"limit"`
	Bound     int             `json:"bound"`
}

// Parse reads the lease's ID, job, parties and GPU count from the terms,
// without checking signatures.
func (e *LeaseEvidence) Parse() (LeaseTerms, error) {
	if err := e.validate(); err != nil {
		return LeaseTerms{}, fmt.Errorf("%w: lease evidence: %w", ErrInvalidReceipt, err)
	}
	var w termsJSON
	if err := json.Unmarshal(e.Terms, &w); err != nil {
		return LeaseTerms{}, fmt.Errorf("%w: lease terms: %w", ErrInvalidReceipt, err)
	}
	t := LeaseTerms{ID: w.ID, Job: w.Job, GPUs: len(w.GPUs), CPUs: w.CPUs, MemoryBytes: w.Memory, Bound: w.Bound,
		Proposed: time.UnixMilli(w.Proposed).UTC(), Limit: time.Duration(w.Limit) * time.Millisecond}
	if w.Limit < 0 || w.Limit > maxLimit {
		return LeaseTerms{}, fmt.Errorf("%w: lease terms: limit %s out of range", ErrInvalidReceipt, w.Limit)
	}
	var err error
	if t.Provider, err = peer.Decode(w.Provider); err != nil {
		return LeaseTerms{}, fmt.Errorf("%w: lease terms: provider: %w", ErrInvalidReceipt, err)
	}
	if t.Submitter, err = peer.Decode(w.Submitter); err != nil {
		return LeaseTerms{}, fmt.Errorf("%w: lease terms: submitter: %w", ErrInvalidReceipt, err)
	}
	return t, nil
}

// ID is the lease's ID, "" if the terms cannot be read.
func (e *LeaseEvidence) ID() string { t, _ := e.Parse(); return t.ID }

// Job is the leased job's ID, "" if the terms cannot be read.
func (e *LeaseEvidence) Job() string { t, _ := e.Parse(); return t.Job }

// Provider is the lease's provider, "" if the terms cannot be read.
func (e *LeaseEvidence) Provider() peer.ID { t, _ := e.Parse(); return t.Provider }

// Submitter is the lease's submitter, "" if the terms cannot be read.
func (e *LeaseEvidence) Submitter() peer.ID { t, _ := e.Parse(); return t.Submitter }

// Verify checks both signatures over the terms with the public keys
// embedded in the peer IDs the terms name.
func (e *LeaseEvidence) Verify() error {
	_, err := e.verify()
	return err
}

// verify is Verify that also returns the terms it checked.
func (e *LeaseEvidence) verify() (LeaseTerms, error) {
	t, err := e.Parse()
	if err != nil {
		return LeaseTerms{}, err
	}
	msg := append([]byte(leaseDomain), e.Terms...)
	for _, p := range []struct {
		role string
		id   peer.ID
		sig  []byte
	}{{"provider", t.Provider, e.ProviderSig}, {"submitter", t.Submitter, e.SubmitterSig}} {
		var pk *pubKey
		if pk, err = publicKey(p.id); err == nil {
			err = checkSig(pk, msg, p.sig)
		}
		if err != nil {
			return LeaseTerms{}, fmt.Errorf("lease %s: %s %s: %w", t.ID, p.role, p.id, err)
		}
	}
	return t, nil
}

// validate keeps the evidence within what a record can carry and what its
// JSON form carries unchanged: the terms travel as a JSON string, which
// holds any valid UTF-8 exactly.
func (e *LeaseEvidence) validate() error {
	switch {
	case len(e.Terms) == 0 || len(e.Terms) > maxTermsLen:
		return fmt.Errorf("terms: want 1 to %d bytes, got %d", maxTermsLen, len(e.Terms))
	case !utf8.Valid(e.Terms):
		return fmt.Errorf("terms: not valid UTF-8")
	case !bytes.HasPrefix(bytes.TrimLeft(e.Terms, " \t\r\n"), []byte("{")):
		return fmt.Errorf("terms: not a JSON object")
	case len(e.ProviderSig) > maxSigLen || len(e.SubmitterSig) > maxSigLen:
		return fmt.Errorf("signature longer than %d bytes", maxSigLen)
	}
	return nil
}
