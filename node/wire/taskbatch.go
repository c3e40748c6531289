package wire

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/e31network/e31/market"
	"github.com/e31network/e31/p2p"
)

// KindTaskBatch announces, from a submitter, leases of its arrays' tasks
// that both parties signed and releases of such leases, many to a
// message: an array's tasks would otherwise cost the jobs topic two
// messages each, where its declaration costs one for them all. A
// provider announces neither for a task; the submitter, which
// countersigns every lease of its tasks and every final receipt, does,
// about once a second.
const KindTaskBatch = "task-batch"

// TaskBatchBody is a KindTaskBatch's body.
type TaskBatchBody struct {
	Leases   []SignedLease `json:"leases,omitempty"`
	Releases []ReleaseBody `json:"releases,omitempty"`
}

// taskBatchBudget is what a batch's items may take encoded: a gossip
// message's payload, less room for the envelope around the body.
const taskBatchBudget = p2p.MaxPayload - 1024

// CheckTaskBatch checks a task batch as ValidateJobMessage does a lease
// and a release, for each item: every lease and release is of a task
// (market.SplitTaskID) whose submitter, named in it, signed the batch;
// every lease carries both signatures.
func CheckTaskBatch(s p2p.Signed) (TaskBatchBody, error) {
	var b TaskBatchBody
	if err := s.Decode(&b); err != nil {
		return TaskBatchBody{}, err
	}
	if len(b.Leases)+len(b.Releases) == 0 {
		return TaskBatchBody{}, errors.New("task batch carries nothing")
	}
	signer := s.Signer.String()
	for i, l := range b.Leases {
		if _, _, ok := market.SplitTaskID(l.Terms.Job); !ok {
			return TaskBatchBody{}, fmt.Errorf("task batch leases[%d]: job %q is no task of an array", i, l.Terms.Job)
		}
		if l.Terms.Submitter != signer {
			return TaskBatchBody{}, fmt.Errorf("%w: task batch by %s carries a lease of submitter %s", p2p.ErrForged, signer, l.Terms.Submitter)
		}
		if err := l.Verify(true); err != nil {
			return TaskBatchBody{}, fmt.Errorf("%w: task batch leases[%d]: %v", p2p.ErrForged, i, err)
		}
		if err := CheckTerms(l.Terms); err != nil {
			return TaskBatchBody{}, fmt.Errorf("task batch leases[%d]: %w", i, err)
		}
	}
	for i, r := range b.Releases {
		if _, _, ok := market.SplitTaskID(r.Job); !ok {
			return TaskBatchBody{}, fmt.Errorf("task batch releases[%d]: job %q is no task of an array", i, r.Job)
		}
		if r.Submitter != signer {
			return TaskBatchBody{}, fmt.Errorf("%w: task batch by %s carries a release of submitter %s", p2p.ErrForged, signer, r.Submitter)
		}
		if r.Lease == "" || r.Provider == "" || len(r.GPUs) > MaxOfferGPUs {
			return TaskBatchBody{}, fmt.Errorf("task batch releases[%d] names no lease", i)
		}
	}
	return b, nil
}

// TaskBatches splits leases and releases into bodies that each fit a
// gossip message, in the order given.
func TaskBatches(leases []SignedLease, releases []ReleaseBody) []TaskBatchBody {
	var out []TaskBatchBody
	var cur TaskBatchBody
	used := 0
	add := func(cost int, put func()) {
		if used+cost > taskBatchBudget && used > 0 {
			out = append(out, cur)
			cur, used = TaskBatchBody{}, 0
		}
		put()
		used += cost
	}
	for _, l := range leases {
		add(encodedSize(l), func() { cur.Leases = append(cur.Leases, l) })
	}
	for _, r := range releases {
		add(encodedSize(r), func() { cur.Releases = append(cur.Releases, r) })
	}
	if used > 0 {
		out = append(out, cur)
	}
	return out
}

// encodedSize is v's JSON size and a comma.
func encodedSize(v any) int {
	b, _ := json.Marshal(v) // fixed structs
	return len(b) + 1
}
