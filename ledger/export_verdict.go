package ledger

import (
	"context"
	"encoding/json"
	"fmt"
)

// exportVerdicts writes, through put, the verdicts kept that name a lease
// of the file (leases), each as {"verdict": …}.
func (l *Ledger) exportVerdicts(ctx context.Context, leases map[string]bool, put func([]byte)) error {
	vs, err := l.Verdicts(ctx)
	if err != nil {
		return fmt.Errorf("export: %w", err)
	}
	for i := range vs {
		v := &vs[i]
		named := false
		for _, r := range v.Replicas {
			named = named || leases[r.Lease]
		}
		if !named {
			continue
		}
		raw, err := MarshalVerdict(*v)
		if err != nil {
			return fmt.Errorf("export: %w", err)
		}
		b, err := json.Marshal(exportEntryJSON{Verdict: raw})
		if err != nil {
			return fmt.Errorf("export verdict on %s: %w", v.Job, err)
		}
		put(b)
	}
	return nil
}

// exportVerdicts are the verdicts of an export file, each verified as
// read, kept to be checked against the file's final receipts once all are
// read.
type exportVerdicts struct {
	pos             []uint64 // each verdict's entry number
	vs              []Verdict
	withoutReceipts int // set by check
}

func (x *exportVerdicts) add(pos uint64, v *Verdict) {
	x.pos = append(x.pos, pos)
	x.vs = append(x.vs, *v)
}

func (x *exportVerdicts) all() []Verdict { return x.vs }

// check holds each verdict to the final receipts among es: every replica
// whose lease has a final receipt in the file must name that receipt's
// provider, submitter and output. A replica whose receipt is not in the
// file is counted (withoutReceipts), not refused: the file is a
// selection. It returns the entry number of the first verdict that fails.
func (x *exportVerdicts) check(es []Entry) (uint64, error) {
	if len(x.vs) == 0 {
		return 0, nil
	}
	finals := map[string]*Receipt{}
	for i := range es {
		r := &es[i].Receipt
		if es[i].Dispute != nil || !r.Final {
			continue
		}
		// A receipt both signed stands over a one-sided record.
		if old, ok := finals[r.Lease]; !ok || (old.OneSided() && !r.OneSided()) {
			finals[r.Lease] = r
		}
	}
	for i := range x.vs {
		v := &x.vs[i]
		missing := false
		for _, rep := range v.Replicas {
			r, ok := finals[rep.Lease]
			if !ok {
				missing = true
				continue
			}
			if err := checkReplica(v, rep, r); err != nil {
				return x.pos[i], err
			}
		}
		if missing {
			x.withoutReceipts++
		}
	}
	return 0, nil
}

// checkReplica checks a replica of v against its lease's final receipt r.
func checkReplica(v *Verdict, rep VerdictReplica, r *Receipt) error {
	name := fmt.Sprintf("verdict on %s: replica lease %s (provider %s)", v.Job, rep.Lease, rep.Provider)
	switch {
	case r.Provider != rep.Provider:
		return fmt.Errorf("%s: its final receipt names provider %s", name, r.Provider)
	case r.Submitter != v.Submitter:
		return fmt.Errorf("%s: its final receipt names submitter %s, not the verdict's %s", name, r.Submitter, v.Submitter)
	case r.Output != rep.Output:
		return fmt.Errorf("%s: its final receipt names output %q, the verdict %q", name, r.Output, rep.Output)
	}
	return nil
}
