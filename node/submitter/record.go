package submitter

import (
	"maps"
	"slices"
	"time"

	"github.com/e31network/e31/ledger"
	"github.com/e31network/e31/market"
	"github.com/e31network/e31/node/api"
	"github.com/e31network/e31/node/wire"
	"github.com/e31network/e31/p2p"
	"github.com/ipfs/go-cid"
)

// Record is a job this node submitted, persisted under state.PrefixJob.
// Its core says what the job is and how far its current attempt has come;
// the parts embedded in it (RecordChain, RecordOutput, RecordRetries,
// RecordHold, RecordSeen, RecordAvoid, RecordGang, RecordArray) hold what
// only some records need, each read and set through the record as if it
// were its own field. The parts are embedded as values, in the order their
// fields always had, so that the record's JSON is flat and byte for byte
// what it was (testdata/record_full.json).
type Record struct {
	ID          string             `json:"id"`
	Envelope    []byte             `json:"envelope"` // the signed declaration
	Declaration market.Declaration `json:"declaration"`
	// Market is the class market the job was declared in (its
	// declaration's market), whose jobs topic carries its messages; nil:
	// this node's own (no class markets, or a record from before jobs
	// named theirs).
	Market *p2p.Shard `json:"market,omitempty"`
	// Labels are the submitter's tags for the job (the declaration's
	// labels, taken out of what is broadcast).
	Labels map[string]string `json:"labels,omitempty"`
	// Sources are the declaration's data sources as the user gave them.
	Sources []string `json:"sources,omitempty"`
	RecordChain
	State       api.JobState       `json:"state"`
	Outcome     ledger.Outcome     `json:"outcome,omitempty"`
	Attribution ledger.Attribution `json:"attribution,omitempty"`
	Reason      string             `json:"reason,omitempty"`
	ExitCode    *int               `json:"exit_code,omitempty"`
	Lease       *wire.SignedLease  `json:"lease,omitempty"`
	Steps       []api.Step         `json:"steps"`
	RecordOutput
	Submitted   time.Time `json:"submitted"`
	Wait        string    `json:"wait,omitempty"` // why it waits, from the last Match
	LastReceipt time.Time `json:"last_receipt,omitempty"`
	Withdrawn   bool      `json:"withdrawn,omitempty"` // asked to withdraw while leased
	RecordRetries
	RecordHold
	// Resumed is set once a resumption of this job was submitted
	// automatically, so that it happens once.
	Resumed bool `json:"resumed,omitempty"`
	RecordSeen
	RecordProbe
	RecordAvoid
	RecordGang
	RecordArray
	RecordVerify
}

// RecordChain links an attempt into its job's chain (attempts.go).
type RecordChain struct {
	ResumeOf string `json:"resume_of,omitempty"`
	// Root is the job as its user submitted it, for an attempt that
	// resumes it (attempts.go); empty for the job as submitted. Next is
	// the attempt that continues this one, once submitted.
	Root string `json:"root,omitempty"`
	Next string `json:"next,omitempty"`
	// ResumeFailed says why an automatic resumption due to this attempt
	// could not be submitted: the job ends with this attempt.
	ResumeFailed string `json:"resume_failed,omitempty"`
	// MovedTo, on a queued attempt, is the class market it is being moved
	// to (move.go): from then on no proposal for it is accepted, and once
	// its next attempt is declared there, it ends withdrawn.
	MovedTo *p2p.Shard `json:"moved_to,omitempty"`
}

// RecordOutput is what the attempt's run left: its output and its last
// checkpoint.
type RecordOutput struct {
	Output  string   `json:"output,omitempty"`
	Skipped []string `json:"skipped,omitempty"` // left out of the output, and why
	// ProviderKeeps is when the provider releases its copy of the output
	// and checkpoints; this node keeps its own until they are removed.
	ProviderKeeps time.Time `json:"provider_keeps,omitzero"`
	Checkpoint    string    `json:"checkpoint,omitempty"`
	CheckpointN   int       `json:"checkpoint_n,omitempty"`
	// CheckpointLease is the lease whose provider took Checkpoint, and
	// CheckpointAt when it said it did: what a preempted lease's final
	// receipt may name as its last (checkpoint_at). Empty for a
	// checkpoint from elsewhere (an earlier attempt's).
	CheckpointLease string    `json:"checkpoint_lease,omitempty"`
	CheckpointAt    time.Time `json:"checkpoint_at,omitzero"`
}

// RecordRetries counts the attempts that lead to this one (attempts.go).
type RecordRetries struct {
	// Resumes counts how many resumptions lead to this job (0 for an
	// original); Retries how many runs again after a failure of the
	// job's own (request.retries), which Resumes leaves out.
	Resumes int `json:"resumes,omitempty"`
	// Preemptions counts the attempts before this one that ended
	// preempted (their provider drained): they resume it without counting
	// in Resumes.
	Preemptions int `json:"preemptions,omitempty"`
	Retries     int `json:"retries,omitempty"`
	// Moves counts the attempts before this one that were moved to
	// another class market while queued (move.go).
	Moves int `json:"moves,omitempty"`
}

// RecordHold is set on the record of a held job (hold.go).
type RecordHold struct {
	// Hold is set on the record of a job held for its upstreams (after,
	// after_any; hold.go). It is never changed in place: a change sets a
	// new Hold, so a copy taken under the lock stays as it was.
	Hold *Hold `json:"hold,omitempty"`
}

// RecordSeen is what the final receipt says the run saw.
type RecordSeen struct {
	// GPUsSeen are the GPUs the final receipt says the run saw;
	// GPUMismatch says how they differ from what was leased and declared.
	GPUsSeen []ledger.GPUSeen `json:"gpus_seen,omitempty"`
	// Relay is the relay the final receipt says the lease's data moved
	// through; "" where it moved directly.
	Relay       string `json:"relay,omitempty"`
	GPUMismatch string `json:"gpu_mismatch,omitempty"`
}

// RecordAvoid names the providers that failed the job (avoid.go).
type RecordAvoid struct {
	// Avoid lists the providers that failed this job, oldest first: its
	// re-announcements name them so that no peer's Match places it there
	// again (avoid.go).
	Avoid []string `json:"avoid,omitempty"`
	// AvoidUntil is when each avoid in Avoid lifts; Avoided counts, by
	// provider, how often this job avoided it, each avoid lasting twice
	// the one before (avoid.go).
	AvoidUntil map[string]time.Time `json:"avoid_until,omitempty"`
	Avoided    map[string]int       `json:"avoided,omitempty"`
}

// RecordGang is set on a gang's record (gang.go).
type RecordGang struct {
	// RetryNext and PreemptNext, on a gang's record, say its next
	// attempt is a retry (request.retries) or goes on after a preemption,
	// rather than a resumption: each is counted apart.
	RetryNext   bool `json:"retry_next,omitempty"`
	PreemptNext bool `json:"preempt_next,omitempty"`
	// GangOver, on a gang's record, says the attempt has ended for good,
	// or gone on as its next: nothing more is watched of it.
	GangOver bool `json:"gang_over,omitempty"`
	// GangLease, on a gang's record, is the gang lease every part's
	// provider and this node signed, once they did (gang.go).
	GangLease *wire.SignedGangLease `json:"gang_lease,omitempty"`
}

// RecordArray is set on an array's record and on its tasks' (array.go).
type RecordArray struct {
	// Tasks, on an array's record, is how many tasks it has (array.go);
	// Array and Index, on a task's, are its array's ID and its index
	// (market.Array.Index).
	Tasks int    `json:"tasks,omitempty"`
	Array string `json:"array,omitempty"`
	Index int    `json:"index,omitempty"`
	// MaxFailures, on an array's record, is its array.max_failures, which
	// is not broadcast; Stopped is set once that many tasks failed, to
	// the failures counted then, and StopDone once the queued tasks were
	// withdrawn (array_stop.go).
	MaxFailures int  `json:"max_failures,omitempty"`
	Stopped     int  `json:"stopped,omitempty"`
	StopDone    bool `json:"stop_done,omitempty"`
	// Confirmed says the provider of a task's lease reported that it
	// recorded the lease: a task's lease is announced by this node, so
	// the view cannot tell.
	Confirmed bool `json:"confirmed,omitempty"`
}

// provider is the provider of the record's lease, "" without one.
func (r *Record) provider() string {
	if r.Lease == nil {
		return ""
	}
	return r.Lease.Terms.Provider
}

// replicated reports whether the record is the first of a job run as
// replicas, whose check is not over (replicas.go).
func (r *Record) replicated() bool {
	return r.Verify != nil && r.Verify.Replicas > 1 && r.Root == "" && r.ReplicaOf == "" && !r.isArray()
}

// setEnding records how the job's lease ended, or how the job ended
// without one (withdrawn while queued), in place of any ending before it.
func (r *Record) setEnding(e ledger.Ending) {
	r.Outcome, r.Attribution, r.Reason, r.ExitCode = e.Outcome, e.Attribution, e.Reason, e.ExitCode
}

// step records that a step was reached, once, keeping the steps in their
// order whatever order the news of them arrived in.
func (r *Record) step(name api.StepName, at time.Time) {
	for _, s := range r.Steps {
		if s.Step == name {
			return
		}
	}
	r.Steps = append(r.Steps, api.Step{Step: name, At: at.UTC()})
	slices.SortStableFunc(r.Steps, func(a, b api.Step) int { return a.Step.Order() - b.Step.Order() })
}

// reached records the steps a provider says its lease reached (run and
// output; it cannot claim any other) and moves the job's state forward to
// match, never back. A step's time is the provider's, unless its clock is
// off by more than maxClockSkew from now; then it is now.
func (r *Record) reached(steps []wire.StepAt, now time.Time) {
	for _, st := range steps {
		at := time.UnixMilli(st.At)
		if at.Sub(now).Abs() > maxClockSkew {
			at = now
		}
		switch st.Step {
		case api.StepRun:
			if r.State == api.JobRenting {
				r.State = api.JobRunning
			}
			r.step(api.StepRun, at)
		case api.StepOutput:
			if r.State == api.JobRenting || r.State == api.JobRunning {
				r.State = api.JobOutput
			}
			r.step(api.StepOutput, at)
		}
	}
}

// stepAt is when a step was reached, or zero.
func (r *Record) stepAt(name api.StepName) time.Time {
	for _, s := range r.Steps {
		if s.Step == name {
			return s.At
		}
	}
	return time.Time{}
}

func (r *Record) terminal() bool { return r.State.Terminal() }

// copy returns a copy that shares nothing that later changes mutate.
func (r *Record) copy() Record {
	c := *r
	c.Steps = slices.Clone(r.Steps)
	if r.Hold != nil {
		h := *r.Hold
		c.Hold = &h
	}
	return c
}

// API renders a job record for the local API.
func (r *Record) API() api.Job {
	out := api.Job{
		ID:          r.ID,
		Name:        r.Declaration.Name,
		Labels:      maps.Clone(r.Labels),
		State:       r.State,
		Outcome:     string(r.Outcome),
		Attribution: string(r.Attribution),
		Steps:       slices.Clone(r.Steps),
		ExitCode:    r.ExitCode,
		Output:      r.Output,
		Checkpoint:  r.Checkpoint,
		GPUs:        []string{},
		Reason:      r.Reason,
		Submitted:   r.Submitted.UTC(),
		ResumeOf:    r.ResumeOf,
		Skipped:     slices.Clone(r.Skipped),
		Avoid:       slices.Clone(r.Avoid),
		Array:       r.Array,
		Index:       r.Index,
	}
	if r.Market != nil {
		out.Market = r.Market.String()
	}
	if !r.ProviderKeeps.IsZero() {
		t := r.ProviderKeeps.UTC()
		out.ProviderKeepsUntil = &t
	}
	for _, g := range r.GPUsSeen {
		out.GPUsSeen = append(out.GPUsSeen, api.GPUSeen{UUID: g.UUID, Model: g.Model})
	}
	out.GPUMismatch = r.GPUMismatch
	out.DataRelay = r.Relay
	for _, in := range r.Declaration.Data {
		out.Inputs = append(out.Inputs, in.Source)
	}
	if r.Wait != "" && !r.terminal() && r.Reason == "" {
		out.Reason = r.Wait // why a leased job is held up
	}
	if r.State == api.JobQueued {
		out.Reason = r.Wait
		if out.Reason == "" {
			out.Reason = "waiting for the next matching epoch"
		}
	}
	if r.Lease != nil {
		out.Provider = r.Lease.Terms.Provider
		out.Lease = r.Lease.Terms.ID
		out.Price = r.Lease.Terms.Price
		out.GPUs = slices.Clone(r.Lease.Terms.GPUs)
	}
	if out.Steps == nil {
		out.Steps = []api.Step{}
	}
	return out
}

// contentRoots are the DAGs the job's provider fetches from this node: its
// inputs and its image.
func (r *Record) contentRoots() []cid.Cid {
	var out []cid.Cid
	for _, in := range r.Declaration.Data {
		if c, err := cid.Decode(in.Source); err == nil {
			out = append(out, c)
		}
	}
	if c, err := cid.Decode(r.Declaration.Work.Image); err == nil {
		out = append(out, c)
	}
	if cp := r.Declaration.Output.Checkpoints; cp != nil {
		if c, err := cid.Decode(cp.From); err == nil {
			out = append(out, c)
		}
	}
	return out
}
