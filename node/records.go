package node

import (
	"slices"
	"time"

	"github.com/e31network/e31/market"
	"github.com/e31network/e31/node/api"
)

// Submitter-side job states (api.Job.State).
const (
	stateQueued    = "queued"
	stateRenting   = "renting"
	stateRunning   = "running"
	stateOutput    = "output"
	stateReleased  = "released"
	stateRejected  = "rejected"
	stateWithdrawn = "withdrawn"
)

// The five steps, as recorded in api.Job.Steps.
const (
	stepSubmit  = "submit"
	stepRent    = "rent"
	stepRun     = "run"
	stepOutput  = "output"
	stepRelease = "release"
)

// jobRecord is a job this node submitted, persisted under prefixJob.
type jobRecord struct {
	ID          string             `json:"id"`
	Envelope    []byte             `json:"envelope"` // the signed declaration
	Declaration market.Declaration `json:"declaration"`
	// Sources are the declaration's data sources as the user gave them.
	Sources     []string     `json:"sources,omitempty"`
	ResumeOf    string       `json:"resume_of,omitempty"`
	State       string       `json:"state"`
	Outcome     string       `json:"outcome,omitempty"`
	Attribution string       `json:"attribution,omitempty"`
	Reason      string       `json:"reason,omitempty"`
	ExitCode    *int         `json:"exit_code,omitempty"`
	Lease       *SignedLease `json:"lease,omitempty"`
	Steps       []api.Step   `json:"steps"`
	Output      string       `json:"output,omitempty"`
	Checkpoint  string       `json:"checkpoint,omitempty"`
	CheckpointN int          `json:"checkpoint_n,omitempty"`
	Submitted   time.Time    `json:"submitted"`
	Wait        string       `json:"wait,omitempty"` // why it waits, from the last Match
	LastReceipt time.Time    `json:"last_receipt,omitempty"`
	Withdrawn   bool         `json:"withdrawn,omitempty"` // asked to withdraw while leased
	// Resumes counts how many resumptions lead to this job (0 for an
	// original).
	Resumes int `json:"resumes,omitempty"`
	// Resumed is set once a resumption of this job was submitted
	// automatically, so that it happens once.
	Resumed bool `json:"resumed,omitempty"`
	// lastContact is when the provider was last heard from; not persisted:
	// after a restart the provider gets a full window again.
	lastContact time.Time
}

// stepOrder is the order of the five steps.
var stepOrder = map[string]int{stepSubmit: 0, stepRent: 1, stepRun: 2, stepOutput: 3, stepRelease: 4}

// step records that a step was reached, once, keeping the steps in their
// order whatever order the news of them arrived in.
func (j *jobRecord) step(name string, at time.Time) {
	for _, s := range j.Steps {
		if s.Step == name {
			return
		}
	}
	j.Steps = append(j.Steps, api.Step{Step: name, At: at.UTC()})
	slices.SortStableFunc(j.Steps, func(a, b api.Step) int { return stepOrder[a.Step] - stepOrder[b.Step] })
}

func (j *jobRecord) terminal() bool {
	switch j.State {
	case stateReleased, stateRejected, stateWithdrawn:
		return true
	}
	return false
}

// Provider-side lease states.
const (
	leaseHeld     = "held"
	leaseStaging  = "staging"
	leaseRunning  = "running"
	leaseOutput   = "output"
	leaseReleased = "released"
)

// leaseRecord is a lease this node provides, persisted under prefixLease.
type leaseRecord struct {
	Lease          SignedLease        `json:"lease"`
	Declaration    market.Declaration `json:"declaration"`
	SubmitterAddrs []string           `json:"submitter_addrs"`
	State          string             `json:"state"`
	// Meter: Start is when both had signed; the phase times split it.
	Start       time.Time `json:"start"`
	RunStart    time.Time `json:"run_start,omitzero"`
	OutputStart time.Time `json:"output_start,omitzero"`
	OutputAcked time.Time `json:"output_acked,omitzero"`
	End         time.Time `json:"end,omitzero"`
	Seq         uint64    `json:"seq"`  // next receipt sequence number
	Prev        string    `json:"prev"` // digest of the last receipt
	Outcome     string    `json:"outcome,omitempty"`
	Attribution string    `json:"attribution,omitempty"`
	ExitCode    *int      `json:"exit_code,omitempty"`
	Reason      string    `json:"reason,omitempty"`
	Output      string    `json:"output,omitempty"`
	Checkpoint  string    `json:"checkpoint,omitempty"`
	CheckpointN int       `json:"checkpoint_n,omitempty"`
	Inputs      []string  `json:"inputs,omitempty"`
	FinalSigned bool      `json:"final_signed,omitempty"`
	// LastAlive is the last time the lease was seen held, stamped every
	// receipt interval: after a crash, the meter stops there, not at the
	// restart.
	LastAlive        time.Time `json:"last_alive,omitzero"`
	ReleaseAnnounced bool      `json:"release_announced,omitempty"`
}
