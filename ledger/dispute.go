package ledger

import (
	"encoding/binary"
	"fmt"
)

// Dispute records that the two parties of a lease, once back in contact,
// could not settle on one final receipt. It keeps both versions as each
// party signed it, so that neither is lost and a third party can check
// both; nothing is overwritten.
type Dispute struct {
	Lease string
	// Ours is this node's signed view of how the lease ended; Theirs is the
	// counterpart's. Each is a final receipt signed by one party only: a
	// one-sided record, or a receipt its sender signed and the other side
	// would not countersign.
	Ours   Receipt
	Theirs Receipt
}

// disputeDomain keeps a dispute's entry content apart from a receipt's.
const disputeDomain = "e31-dispute/1\n"

// Verify checks each version's single signature (and a one-sided record's
// lease evidence), that both are final and of the dispute's lease and
// parties, and that the two come from different parties.
func (d *Dispute) Verify() error {
	ours, err := versionSigner(&d.Ours)
	if err != nil {
		return fmt.Errorf("our version: %w", err)
	}
	theirs, err := versionSigner(&d.Theirs)
	if err != nil {
		return fmt.Errorf("their version: %w", err)
	}
	return d.check(ours, theirs)
}

// check applies the structural rules of a dispute to two versions whose
// signers are known.
func (d *Dispute) check(ours, theirs Signer) error {
	o, t := &d.Ours, &d.Theirs
	switch {
	case o.Lease != d.Lease || t.Lease != d.Lease:
		return fmt.Errorf("%w: dispute of lease %s holds versions of %s and %s", ErrInvalidReceipt, d.Lease, o.Lease, t.Lease)
	case o.Job != t.Job || o.Provider != t.Provider || o.Submitter != t.Submitter:
		return fmt.Errorf("%w: the versions name different jobs or parties", ErrInvalidReceipt)
	case ours == theirs:
		return fmt.Errorf("%w: both versions are signed by the %s", ErrInvalidReceipt, ours)
	}
	return nil
}

// versionSigner verifies a version of a disputed lease and returns which
// party signed it.
func versionSigner(r *Receipt) (Signer, error) {
	if err := r.Validate(); err != nil {
		return "", err
	}
	if !r.Final {
		return "", fmt.Errorf("%w: a disputed version must be a final receipt", ErrInvalidReceipt)
	}
	if r.OneSided() {
		return r.Signer, r.Verify()
	}
	role, id, sig := SignerProvider, r.Provider, r.ProviderSig
	switch {
	case len(r.ProviderSig) > 0 && len(r.SubmitterSig) > 0:
		return "", fmt.Errorf("%w: signed by both parties, so not in dispute: append it", ErrInvalidReceipt)
	case len(r.SubmitterSig) > 0:
		role, id, sig = SignerSubmitter, r.Submitter, r.SubmitterSig
	case len(r.ProviderSig) == 0:
		return "", ErrUnsigned
	}
	pk, err := publicKey(id)
	if err != nil {
		return "", err
	}
	if err := checkSig(pk, r.SigningBytes(), sig); err != nil {
		return "", fmt.Errorf("%s %s: %w", role, id, err)
	}
	return role, nil
}

// content is what the entry hash covers: both versions with their
// signatures, under their own domain.
func (d *Dispute) content() []byte {
	o := receiptContent(d.Ours.SigningBytes(), d.Ours.ProviderSig, d.Ours.SubmitterSig)
	t := receiptContent(d.Theirs.SigningBytes(), d.Theirs.ProviderSig, d.Theirs.SubmitterSig)
	b := make([]byte, 0, len(disputeDomain)+len(d.Lease)+len(o)+len(t)+12)
	b = append(b, disputeDomain...)
	b = appendString(b, d.Lease)
	b = binary.AppendUvarint(b, uint64(len(o)))
	b = append(b, o...)
	return append(b, t...)
}

// disputeJSON is the stored and exported form of a Dispute.
type disputeJSON struct {
	Lease  string      `json:"lease"`
	Ours   receiptJSON `json:"ours"`
	Theirs receiptJSON `json:"theirs"`
}

func (d *Dispute) wire(pc *peerText) disputeJSON {
	return disputeJSON{Lease: d.Lease, Ours: d.Ours.wire(pc), Theirs: d.Theirs.wire(pc)}
}

func (w *disputeJSON) dispute(pc *peerText) (Dispute, error) {
	d := Dispute{Lease: w.Lease}
	var err error
	if d.Ours, err = w.Ours.receipt(pc); err == nil {
		err = d.Ours.Validate()
	}
	if err != nil {
		return Dispute{}, fmt.Errorf("ours: %w", err)
	}
	if d.Theirs, err = w.Theirs.receipt(pc); err == nil {
		err = d.Theirs.Validate()
	}
	if err != nil {
		return Dispute{}, fmt.Errorf("theirs: %w", err)
	}
	if err := checkID("lease", d.Lease); err != nil {
		return Dispute{}, fmt.Errorf("%w: %w", ErrInvalidReceipt, err)
	}
	return d, nil
}

func disputeField(name string) (fieldSet, bool) {
	switch name {
	case "lease":
		return nil, true
	case "ours", "theirs":
		return receiptField, true
	}
	return nil, false
}
