package submitter

import (
	"context"
	"fmt"
	"time"

	"github.com/e31network/e31/ledger"
	"github.com/e31network/e31/market"
	"github.com/e31network/e31/node/api"
)

// A job whose declaration asks for replicas (verify.replicas) runs as
// several jobs on the network, each a chain of its own (attempts.go): the
// job as submitted, the first replica, whose ID is the user's handle, and
// the others, submitted with it, each naming it in ReplicaOf and shown
// only within it. A task of an array checked by a spot check (spot.go)
// is the first replica of its check the same way. The verifier
// (verifier.go) keeps the replicas on distinct providers, compares what
// they return once all have come back, runs a third where two disagree,
// and records the verdict on the first replica's record. The network
// cannot tell a replica from any other job: the verify section is never
// signed or broadcast.

// RecordVerify is what checking the job's results asks and found.
type RecordVerify struct {
	// Verify is the declaration's verify section, this node's own: on a
	// job's first record, and on an array's.
	Verify *market.Verify `json:"verify,omitempty"`
	// Replicas, on the first record of a job run as replicas or of a task
	// drawn for a spot check, are the other runs' IDs, in the order they
	// were submitted. Never changed in place.
	Replicas []string `json:"replicas,omitempty"`
	// ReplicaOf, on such a run's own record, is the job or task it checks.
	ReplicaOf string `json:"replica_of,omitempty"`
	// Spot, on the first record of a task of an array with verify.spot,
	// is the draw made once the task completed: spotCheck or spotPass.
	Spot string `json:"spot,omitempty"`
	// Verdict is what the comparison found, once every run came back.
	// Never changed in place.
	Verdict *Verdict `json:"verdict,omitempty"`
	// RerunFor, on a task's first record, names the provider whose check
	// failed: every task it returned for the array was run again.
	RerunFor string `json:"rerun_for,omitempty"`
	// Comparators, on a check's first record with verify.compare.command,
	// are the comparator jobs run, by the pair of runs they compare
	// (comparePair). Never changed in place.
	Comparators map[string]string `json:"comparators,omitempty"`
}

// Verdict is what comparing a job's replicas found.
type Verdict struct {
	// State is verdictAgreed, verdictSettled (a majority, the others
	// lost), verdictDisagreed (none: the job failed) or verdictMoot (no
	// run returned an output to compare).
	State string `json:"state"`
	// Winner is the value the majority returned, and Output the output
	// of the first run that returned it.
	Winner  string       `json:"winner,omitempty"`
	Output  string       `json:"output,omitempty"`
	Results []ReplicaRun `json:"results"`
	Reason  string       `json:"reason,omitempty"`
	At      time.Time    `json:"at"`
	Mode    string       `json:"mode"`
	// Signed says the verdict was signed and kept in this node's ledger
	// (ledger.Verdict), where it makes each lost lease not owed.
	Signed bool `json:"signed,omitempty"`
}

// ReplicaRun is one run as the verdict compared it: its last attempt.
type ReplicaRun struct {
	Job      string         `json:"job"`
	Provider string         `json:"provider,omitempty"`
	Lease    string         `json:"lease,omitempty"`
	Output   string         `json:"output,omitempty"`
	Outcome  ledger.Outcome `json:"outcome,omitempty"`
	Compared string         `json:"compared"`
	Lost     bool           `json:"lost,omitempty"`
}

// Verdict states.
const (
	verdictAgreed    = "agreed"
	verdictSettled   = "settled"
	verdictDisagreed = "disagreed"
	verdictMoot      = "moot"
)

// Spot draws.
const (
	spotCheck = "check"
	spotPass  = "pass"
)

// replicaRun is the handle of a job run as replicas: its first replica's
// chain, shown with what the check found. Until the verdict it is not
// over, whatever its first replica did; then it is what the majority
// returned.
type replicaRun struct{ chain }

func (r replicaRun) view(seen uint64, done bool) (api.Job, <-chan struct{}) {
	out, _ := r.chain.view(seen, done)
	head := r.j.snapshot()
	v := r.k.verify.shown(head)
	out.Verification = v
	switch d := head.Verdict; {
	case d == nil:
		if out.State.Terminal() && out.Outcome == string(ledger.OutcomeCompleted) {
			out.State, out.Outcome, out.Attribution = api.JobRunning, "", ""
			out.Reason = "checking: " + v.Reason
		}
	case (d.State == verdictAgreed || d.State == verdictSettled) && d.Output != "":
		out.State, out.Outcome, out.Attribution, out.Output = api.JobReleased, string(ledger.OutcomeCompleted), "", d.Output
		out.Reason = d.Reason
	case d.State == verdictSettled:
		// The majority returned no output: the job failed as they did.
		out.State, out.Outcome, out.Output = api.JobReleased, string(ledger.OutcomeFailed), ""
		out.Reason = d.Reason
	case d.State == verdictDisagreed:
		out.State, out.Outcome, out.Attribution, out.Output = api.JobReleased, string(ledger.OutcomeFailed), string(ledger.AttributionProvider), ""
		out.Reason = d.Reason
	}
	out.Version += r.k.verify.version() << 48
	if out.State.Terminal() || done || out.Version != seen {
		return out, nil
	}
	return out, r.k.verify.next()
}

// output is the majority's output, once the verdict is in.
func (r replicaRun) output(ctx context.Context) (string, error) {
	out, _ := r.view(0, true)
	if out.Output == "" || out.State != api.JobReleased {
		return "", conflict(fmt.Errorf("job %s has no output yet (%s%s)", out.ID, out.State, outcomeSuffix(out.Outcome)))
	}
	return out.Output, nil
}

// withdraw withdraws every replica that has not ended.
func (r replicaRun) withdraw(ctx context.Context) (api.Job, error) {
	var others []string
	r.j.view(func(rec *Record) { others = rec.Replicas })
	for _, id := range others {
		if t := r.k.jobs.get(id); t != nil {
			if err := r.k.withdrawLast(ctx, t, true); err != nil {
				r.k.log.Warn("withdraw replica", "job", r.j.id, "replica", id, "err", err)
			}
		}
	}
	return r.chain.withdraw(ctx)
}

// shown is the check of results whose first run's record is head, as the
// API shows it.
func (v *verifier) shown(head Record) *api.Verification {
	out := &api.Verification{Mode: head.Verify.Mode(), State: "checking"}
	if d := head.Verdict; d != nil {
		out.State, out.Reason, out.Mode = d.State, d.Reason, d.Mode
		for _, r := range d.Results {
			out.Replicas = append(out.Replicas, api.Replica{ID: r.Job, State: api.JobReleased, Outcome: string(r.Outcome),
				Provider: r.Provider, Lease: r.Lease, Output: r.Output, Compared: r.Compared, Lost: r.Lost})
		}
		return out
	}
	runs, _ := v.runs(head)
	done := 0
	for _, r := range runs {
		l := r.last
		if l.terminal() && !l.resumeDue() {
			done++
		}
		rep := api.Replica{ID: r.t.id, State: l.State, Outcome: string(l.Outcome), Provider: l.provider(), Output: l.Output}
		if l.Lease != nil {
			rep.Lease = l.Lease.Terms.ID
		}
		out.Replicas = append(out.Replicas, rep)
	}
	out.Reason = fmt.Sprintf("%d of %d replicas back", done, len(runs))
	return out
}
