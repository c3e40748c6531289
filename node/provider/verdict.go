package provider

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"

	"github.com/e31network/e31/ledger"
	"github.com/e31network/e31/node/wire"
	"github.com/e31network/e31/p2p"
	"github.com/libp2p/go-libp2p/core/peer"
)

// VerdictLedger is what the verdict inbox needs of the ledger
// (ledger.Ledger): the receipts of a lease, and a place for verdicts.
type VerdictLedger interface {
	ByLease(ctx context.Context, lease string) ([]ledger.Entry, error)
	KeepVerdict(ctx context.Context, v ledger.Verdict) error
}

// VerdictInbox takes submitters' verdicts on replicas that name this
// provider's leases (wire.ProtoVerdict). It keeps a verdict only when it
// verifies, comes from the submitter who signed it, and says of each of
// this provider's leases it names what that lease's final receipt, both
// parties' signatures on it, says: the submitter, and the output. A
// verdict kept here makes a lost lease not owed in this provider's own
// figures too, as it is in the submitter's. Anything else is refused with
// a code and logged.
type VerdictInbox struct {
	// Set by NewVerdictInbox, never changed; the ledger guards itself.
	self   peer.ID
	ledger VerdictLedger
	log    *slog.Logger
}

// NewVerdictInbox returns the inbox of the provider self, keeping
// verdicts in l; log nil discards what it says.
func NewVerdictInbox(self peer.ID, l VerdictLedger, log *slog.Logger) *VerdictInbox {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &VerdictInbox{self: self, ledger: l, log: log}
}

// Handle is the handler of wire.ProtoVerdict.
func (in *VerdictInbox) Handle(ctx context.Context, from peer.ID, raw json.RawMessage) (any, error) {
	v, err := in.check(ctx, from, raw)
	if err != nil {
		in.log.Warn("verdict refused", "from", from, "code", p2p.RefusalCode(err), "err", err)
		return nil, err
	}
	if err := in.ledger.KeepVerdict(ctx, v); err != nil {
		in.log.Error("verdict not kept", "job", v.Job, "from", from, "err", err)
		return nil, fmt.Errorf("keep verdict on %s: %w", v.Job, err)
	}
	for _, r := range v.Replicas {
		if r.Provider == in.self {
			in.log.Info("verdict kept", "job", v.Job, "lease", r.Lease, "submitter", v.Submitter,
				"winner", v.Winner, "compared", r.Compared, "lost", v.Lost(r.Lease))
		}
	}
	return struct{}{}, nil
}

// check decodes and checks a verdict from a peer; a refusal names why.
func (in *VerdictInbox) check(ctx context.Context, from peer.ID, raw json.RawMessage) (ledger.Verdict, error) {
	var req wire.VerdictRequest
	if err := p2p.DecodeStrict(raw, &req); err != nil {
		return ledger.Verdict{}, p2p.Refuse(wire.CodeBadVerdict, err)
	}
	v, err := ledger.UnmarshalVerdict(req.Verdict)
	if err != nil {
		return ledger.Verdict{}, p2p.Refuse(wire.CodeBadVerdict, err)
	}
	if err := v.Verify(); err != nil {
		return ledger.Verdict{}, p2p.Refuse(wire.CodeBadVerdict, err)
	}
	if from != v.Submitter {
		return ledger.Verdict{}, p2p.Refuse(wire.CodeBadVerdict, fmt.Errorf("verdict on %s is signed by %s, not by its sender %s", v.Job, v.Submitter, from))
	}
	mine := 0
	for _, r := range v.Replicas {
		if r.Provider != in.self {
			continue
		}
		mine++
		if err := in.checkReplica(ctx, &v, r); err != nil {
			return ledger.Verdict{}, err
		}
	}
	if mine == 0 {
		return ledger.Verdict{}, p2p.Refuse(wire.CodeNoReceipt, fmt.Errorf("verdict on %s names no lease of provider %s", v.Job, in.self))
	}
	return v, nil
}

// checkReplica holds the replica r, one of this provider's, to its
// lease's final receipt in the ledger.
func (in *VerdictInbox) checkReplica(ctx context.Context, v *ledger.Verdict, r ledger.VerdictReplica) error {
	es, err := in.ledger.ByLease(ctx, r.Lease)
	if err != nil {
		return fmt.Errorf("verdict on %s: receipts of lease %s: %w", v.Job, r.Lease, err)
	}
	var fin *ledger.Receipt
	for i := range es {
		if rc := &es[i].Receipt; es[i].Dispute == nil && rc.Final && !rc.OneSided() {
			fin = rc
		}
	}
	switch {
	case fin == nil:
		return p2p.Refuse(wire.CodeNoReceipt, fmt.Errorf("verdict on %s: no final receipt of lease %s is held here", v.Job, r.Lease))
	case fin.Provider != in.self || fin.Submitter != v.Submitter:
		return p2p.Refuse(wire.CodeNoReceipt, fmt.Errorf("verdict on %s: lease %s is not one %s leased from this provider", v.Job, r.Lease, v.Submitter))
	case fin.Output != r.Output:
		return p2p.Refuse(wire.CodeWrongOutput, fmt.Errorf("verdict on %s: lease %s gave output %q by its final receipt, not %q", v.Job, r.Lease, fin.Output, r.Output))
	}
	return nil
}
