package submitter

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"path"

	"github.com/ipfs/go-cid"

	"github.com/e31network/e31/ledger"
	"github.com/e31network/e31/market"
)

// comparer reads what a run returned as a check compares it: the CID of
// its output folder (out/ in the DAG its final receipt names, without the
// logs, which may carry times), or a digest of the CIDs of the paths the
// declaration names in it. A run that returned no output is compared as
// "no output" and how it ended.
type comparer struct{ *parts }

func (c comparer) result(ctx context.Context, r Record, v *market.Verify) (ReplicaRun, error) {
	res := ReplicaRun{Job: r.ID, Provider: r.provider(), Output: r.Output, Outcome: r.Outcome}
	if r.Lease != nil {
		res.Lease = r.Lease.Terms.ID
	}
	if r.Outcome != ledger.OutcomeCompleted || r.Output == "" {
		res.Compared = "no output: " + string(r.Outcome)
		if r.Outcome == "" {
			res.Compared = "no output: " + string(r.State)
		}
		return res, nil
	}
	root, err := cid.Decode(r.Output)
	if err != nil {
		return res, fmt.Errorf("output %q: %w", r.Output, err)
	}
	im := importer{c.parts}
	out, err := im.resolveInDAG(ctx, root, "out")
	if err != nil {
		return res, fmt.Errorf("output folder of %s: %w", r.ID, err)
	}
	if v == nil || v.Compare == nil || len(v.Compare.Paths) == 0 {
		res.Compared = out.String()
		return res, nil
	}
	h := sha256.New()
	for _, p := range v.Compare.Paths {
		at, err := im.resolveInDAG(ctx, out, path.Clean(p))
		if err != nil {
			fmt.Fprintf(h, "%s\x00absent\n", p)
			continue
		}
		fmt.Fprintf(h, "%s\x00%s\n", p, at)
	}
	res.Compared = "paths:" + hex.EncodeToString(h.Sum(nil))[:32]
	return res, nil
}

// verifyOf is the verify section that governs the check whose first
// run's record is head: its own, or, for a task of an array, the array's.
func verifyOf(k *kit, head Record) *market.Verify {
	if head.Verify != nil || head.Array == "" {
		return head.Verify
	}
	if a := k.jobs.get(head.Array); a != nil {
		var v *market.Verify
		a.view(func(r *Record) { v = r.Verify })
		return v
	}
	return nil
}
