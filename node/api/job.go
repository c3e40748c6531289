package api

import (
	"time"

	"github.com/e31network/e31/market"
)

// Job is a job's status as `e31 status --json` prints it.
type Job struct {
	ID          string            `json:"id"`
	Name        string            `json:"name"`
	Labels      map[string]string `json:"labels,omitempty"`
	State       JobState          `json:"state"`
	Outcome     string            `json:"outcome"`
	Attribution string            `json:"attribution"`
	Provider    string            `json:"provider"`
	Lease       string            `json:"lease,omitempty"`
	// Price is what an hour of one of the lease's GPUs costs, as both
	// parties signed it; absent: free, or no lease.
	Price market.Price `json:"price,omitempty"`
	// Path is, while the lease lives, how this node reaches its provider,
	// and so how the job's data moves: direct, relayed-data (through a
	// relay whose circuits carry data, the hole punch having failed;
	// PathVia names it), relayed (only a relay, no path for data yet:
	// waiting for a hole punch) or none.
	Path    string `json:"path,omitempty"`
	PathVia string `json:"path_via,omitempty"`
	// StagingRate is, while the provider stages the job's inputs from
	// this node, how fast: the bytes a second served it over the last few
	// seconds.
	StagingRate float64 `json:"staging_rate,omitempty"`
	// DataRelay, once released, is the relay the final receipt says the
	// lease's data moved through, signed by both parties; "" where it
	// moved directly.
	DataRelay  string    `json:"data_relay,omitempty"`
	Steps      []Step    `json:"steps"`
	ExitCode   *int      `json:"exit_code"`
	Output     string    `json:"output"`
	Checkpoint string    `json:"checkpoint"`
	GPUs       []string  `json:"gpus"`
	Reason     string    `json:"reason"`
	Submitted  time.Time `json:"submitted"`
	ResumeOf   string    `json:"resume_of,omitempty"`
	// Root, on the view of one attempt asked for by its own ID, is the job
	// as its user submitted it, the handle for its whole life.
	Root   string   `json:"root,omitempty"`
	Inputs []string `json:"inputs,omitempty"`
	// Market, in a network split by resource class (e31d --market
	// classes), is the class market the job is declared in, that of its
	// last attempt: a job that waited in one with no room moves to
	// another (its attempts say from where).
	Market string `json:"market,omitempty"`
	// Attempts are the job's runs, first to last: the job as submitted and
	// each resumption of it. The job's state, provider, steps and output
	// are those of the last; an attempt lost with its provider and due to
	// be resumed leaves the job queued, not ended.
	Attempts []Attempt `json:"attempts,omitempty"`
	// Held sums what the leases of every attempt held, from the ledger;
	// set on a job asked for by ID, not in lists.
	Held *Held `json:"held,omitempty"`
	// Skipped names what the output left out, and why: links pointing out
	// of the output are never followed or carried, device nodes not kept.
	Skipped []string `json:"skipped,omitempty"`
	// Avoid lists the providers that failed the job and that its
	// re-announcements tell every peer to skip for it.
	Avoid []string `json:"avoid,omitempty"`
	// ProviderKeepsUntil is when the provider releases its copy of the
	// output and checkpoints (its --retention after release); this node
	// keeps the copies it fetched until they are removed, and its ledger
	// keeps their CIDs for good.
	ProviderKeepsUntil *time.Time `json:"provider_keeps_until,omitempty"`
	// GPUsSeen are the GPUs the provider's sandbox found before the run,
	// as its final receipt says. GPUMismatch, when set, says how they
	// differ from the lease's GPUs or the declared gpu_model.
	GPUsSeen    []GPUSeen `json:"gpus_seen,omitempty"`
	GPUMismatch string    `json:"gpu_mismatch,omitempty"`
	// Tasks, on an array, counts its tasks by how far each has come; an
	// array is released once every task has ended. Its tasks are jobs of
	// their own, under ARRAY.INDEX.
	Tasks *TaskCounts `json:"tasks,omitempty"`
	// Verification, on a job whose declaration asks for its results to
	// be checked (verify), is how the check stands.
	Verification *Verification `json:"verification,omitempty"`
	// Parts, on a gang (request.nodes), are its parts in rank order:
	// where each runs and how it stands. A gang is an array whose tasks
	// are its parts, placed and ended together.
	Parts []Part `json:"parts,omitempty"`
	// Array and Index, on a task, are its array's ID and its place in it.
	Array string `json:"array,omitempty"`
	Index int    `json:"index,omitempty"`
	// Version changes with every change of the job on its submitter, and
	// when the submitter restarts; compare it only for equality. GET
	// /v1/jobs/{id}?version=N&wait=D answers when it is no longer N.
	Version uint64 `json:"version"`
}

// Step is one of the five steps of a job and when it was reached.
type Step struct {
	Step StepName  `json:"step"`
	At   time.Time `json:"at"`
}

// Attempt is one run of a job: the job as submitted, or a resumption of
// it, each with its own ID on the network, its own lease and receipts.
type Attempt struct {
	N           int      `json:"n"` // 1 for the job as submitted
	ID          string   `json:"id"`
	State       JobState `json:"state"`
	Outcome     string   `json:"outcome,omitempty"`
	Attribution string   `json:"attribution,omitempty"`
	Reason      string   `json:"reason,omitempty"`
	Provider    string   `json:"provider,omitempty"`
	Lease       string   `json:"lease,omitempty"`
	// Submitted is when the attempt was announced; From and To when its
	// lease was agreed and released.
	Submitted time.Time  `json:"submitted"`
	From      *time.Time `json:"from,omitempty"`
	To        *time.Time `json:"to,omitempty"`
	// StartedFrom is the checkpoint the attempt resumed from; empty for a
	// run from the beginning.
	StartedFrom string `json:"started_from,omitempty"`
	// Market is the class market the attempt was declared in; "" where
	// the network is not split by class.
	Market     string `json:"market,omitempty"`
	Checkpoint string `json:"checkpoint,omitempty"` // the last it took
	Output     string `json:"output,omitempty"`
}

// Part is one part of a gang (request.nodes): its rank, the job that
// runs it, on which provider, and how it stands.
type Part struct {
	Rank     int      `json:"rank"`
	ID       string   `json:"id"`
	Provider string   `json:"provider,omitempty"`
	State    JobState `json:"state"`
	Outcome  string   `json:"outcome,omitempty"`
}

// Held is what a job's leases held, summed over its attempts (and an
// array's over its tasks) by the ledger's one sum (ledger.Policy.Bill).
type Held struct {
	HeldMs    int64    `json:"held_ms"`
	Providers []string `json:"providers"`
	GPUHours  float64  `json:"gpu_hours"`
	// OwedGPUHours is the part the default policy makes owed (e31 usage
	// describes it).
	OwedGPUHours float64 `json:"owed_gpu_hours"`
	// NotOwedGPUHours is GPUHours less OwedGPUHours; Leases counts the
	// leases summed.
	NotOwedGPUHours  float64 `json:"not_owed_gpu_hours"`
	Leases           int     `json:"leases,omitempty"`
	OneSidedGPUHours float64 `json:"one_sided_gpu_hours,omitempty"`
	// CPUHours is the CPUs held times the time, where receipts say, and
	// OwedCPUHours the part owed: all a job without GPUs held.
	CPUHours     float64 `json:"cpu_hours,omitempty"`
	OwedCPUHours float64 `json:"owed_cpu_hours,omitempty"`
	// VerificationGPUHours is the part of GPUHours that checking the
	// results held: the other replicas, the spot checks (verify).
	VerificationGPUHours float64 `json:"verification_gpu_hours,omitempty"`
}

// GPUSeen is one GPU a run saw: its UUID and model as the driver names it.
type GPUSeen struct {
	UUID  string `json:"uuid"`
	Model string `json:"model"`
}
