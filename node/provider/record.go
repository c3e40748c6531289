package provider

import (
	"time"
	"unicode/utf8"

	"github.com/e31network/e31/ledger"
	"github.com/e31network/e31/market"
	"github.com/e31network/e31/node/api"
	"github.com/e31network/e31/node/wire"
	"github.com/e31network/e31/p2p/peertext"
)

// State is where a lease stands on its provider.
type State string

// Lease states, in their order.
const (
	Held     State = "held"
	Staging  State = "staging"
	Running  State = "running"
	Output   State = "output"
	Released State = "released"
)

// Record is a lease this node provides, persisted under state.PrefixLease.
type Record struct {
	Lease          wire.SignedLease   `json:"lease"`
	Declaration    market.Declaration `json:"declaration"`
	SubmitterAddrs []string           `json:"submitter_addrs"`
	State          State              `json:"state"`
	// Meter: Start is when both had signed; the phase times split it.
	Start       time.Time          `json:"start"`
	RunStart    time.Time          `json:"run_start,omitzero"`
	OutputStart time.Time          `json:"output_start,omitzero"`
	OutputAcked time.Time          `json:"output_acked,omitzero"`
	End         time.Time          `json:"end,omitzero"`
	Seq         uint64             `json:"seq"`  // next receipt sequence number
	Prev        string             `json:"prev"` // digest of the last receipt
	Outcome     ledger.Outcome     `json:"outcome,omitempty"`
	Attribution ledger.Attribution `json:"attribution,omitempty"`
	ExitCode    *int               `json:"exit_code,omitempty"`
	Reason      string             `json:"reason,omitempty"`
	Output      string             `json:"output,omitempty"`
	Checkpoint  string             `json:"checkpoint,omitempty"`
	CheckpointN int                `json:"checkpoint_n,omitempty"`
	// CheckpointAt is when Checkpoint was taken: a preempted lease's
	// final receipt says so, since the work up to it is kept.
	CheckpointAt time.Time `json:"checkpoint_at,omitzero"`
	Inputs       []string  `json:"inputs,omitempty"`
	FinalSigned  bool      `json:"final_signed,omitempty"`
	// LastAlive is the last time the lease was seen held, stamped every
	// receipt interval: after a crash, the meter stops there, not at the
	// restart.
	LastAlive        time.Time `json:"last_alive,omitzero"`
	ReleaseAnnounced bool      `json:"release_announced,omitempty"`
	// OneSided is set once this side stored its own final record of the
	// lease, because the submitter could not countersign at release.
	OneSided bool `json:"one_sided,omitempty"`
	// Skipped lists what the output import left out (links pointing out of
	// the output, device nodes), for the submitter's status.
	Skipped []string `json:"skipped,omitempty"`
	// GPUsSeen are the leased GPUs as the check before the run found
	// them; the final receipt carries them.
	GPUsSeen []ledger.GPUSeen `json:"gpus_seen,omitempty"`
	// Gang is a gang part's gang lease, signed by every party, once it
	// came: the part ran under it.
	Gang *wire.SignedGangLease `json:"gang,omitempty"`
	// Relay is the relay the lease's data moved through to or from the
	// submitter, for want of a direct connection; the final receipt says
	// so. Empty where it moved directly.
	Relay string `json:"relay,omitempty"`
	// Handling names the content of the job's that this node is parsing
	// now (unpacking the image, laying out an input or the checkpoint,
	// importing the output), empty otherwise. A restart that finds it set
	// ends the lease rather than let it go on elsewhere: the content may be
	// what stopped this node (handling.go).
	Handling string `json:"handling,omitempty"`
}

// ID is the lease's ID.
func (r Record) ID() string { return r.Lease.Terms.ID }

// end sets the lease's ending, unless one is set already: the first cause
// found is the one on record.
func (r *Record) end(e ledger.Ending) {
	if r.Outcome == "" {
		r.setEnding(e)
	}
}

// setEnding records e as the lease's ending, in place of any before it,
// with its reason cut to fit the receipt.
func (r *Record) setEnding(e ledger.Ending) {
	r.Outcome, r.Attribution, r.Reason, r.ExitCode = e.Outcome, e.Attribution, clipReason(e.Reason), e.ExitCode
}

// maxReason bounds a lease's reason, which the final receipt carries
// (ledger refuses one over 2,048 bytes): a reason may quote what the job
// brought, such as a layer's entry name, which has no length of its own.
const maxReason = 1024

// clipReason makes reason fit a receipt: one line of valid UTF-8 with no
// control or bidi character (a reason may quote what the job left, and the
// submitter refuses a receipt whose text a terminal would obey), at most
// maxReason bytes, cut on a rune boundary with a mark.
func clipReason(reason string) string {
	reason = peertext.Clean(reason)
	if len(reason) <= maxReason {
		return reason
	}
	cut := maxReason - len("…")
	for cut > 0 && !utf8.RuneStart(reason[cut]) {
		cut--
	}
	return reason[:cut] + "…"
}

// phase is the receipt phase of a lease in this state.
func (s State) phase() ledger.Phase {
	switch s {
	case Running:
		return ledger.PhaseRun
	case Output, Released:
		return ledger.PhaseOutput
	}
	return ledger.PhaseStaging
}

// steps are the steps the lease has reached that the submitter records
// (run, output), for the requests that carry them.
func (r *Record) steps() []wire.StepAt {
	var out []wire.StepAt
	if !r.RunStart.IsZero() {
		out = append(out, wire.StepAt{Step: api.StepRun, At: r.RunStart.UnixMilli()})
	}
	if !r.OutputStart.IsZero() {
		out = append(out, wire.StepAt{Step: api.StepOutput, At: r.OutputStart.UnixMilli()})
	}
	return out
}

// phases splits held time into staging, run and output, in seconds.
func (r *Record) phases() ledger.Phases {
	var p ledger.Phases
	end := r.End
	runStart, outStart := r.RunStart, r.OutputStart
	if outStart.IsZero() {
		outStart = end
	}
	if runStart.IsZero() {
		runStart = outStart
	}
	p.Staging = runStart.Sub(r.Start).Seconds()
	p.Run = outStart.Sub(runStart).Seconds()
	p.Output = end.Sub(outStart).Seconds()
	return p
}

// release is the release announcement of a released lease.
func (r *Record) release() wire.ReleaseBody {
	t := r.Lease.Terms
	return wire.ReleaseBody{
		Lease: t.ID, Job: t.Job, Provider: t.Provider, Submitter: t.Submitter, GPUs: t.GPUs,
		Outcome: r.Outcome, Attribution: r.Attribution,
		HeldMs: r.End.Sub(r.Start).Milliseconds(), At: r.End.UnixMilli(),
	}
}

// latest is the latest of ts.
func latest(ts ...time.Time) time.Time {
	var out time.Time
	for _, t := range ts {
		if t.After(out) {
			out = t
		}
	}
	return out
}

// heldUntilMost is the latest a receipt of the lease may hold its GPUs
// until: the end of the window its terms allow (ledger.HeldWindow), or no
// bound (the zero time) for terms signed before the rule.
func (rec Record) heldUntilMost() time.Time {
	ev := rec.Lease.Evidence()
	t, err := ev.Parse()
	if err != nil {
		return time.Time{}
	}
	_, until, ok := t.HeldWindow()
	if !ok {
		return time.Time{}
	}
	return until
}

// bounded is t, or most where most is set and earlier: the held time a
// receipt claims never passes what the lease allows; the GPUs held longer
// are the provider's to bear.
func bounded(t, most time.Time) time.Time {
	if !most.IsZero() && t.After(most) {
		return most
	}
	return t
}
