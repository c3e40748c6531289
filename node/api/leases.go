package api

import "time"

// Lease is a lease this node provides and that is not yet released, as
// GET /v1/leases shows it (e31 leases): what runs on this node's GPUs, for
// whom, since when, until when at most, and what it is owed so far.
type Lease struct {
	ID  string `json:"id"`
	Job string `json:"job"`
	// Name is the job's name, where its declaration gives one.
	Name      string `json:"name,omitempty"`
	Submitter string `json:"submitter"`
	// GPUs are this node's GPUs the lease holds.
	GPUs        []LeaseGPU `json:"gpus"`
	CPUs        int        `json:"cpus,omitempty"`
	MemoryBytes uint64     `json:"memory_bytes,omitempty"`
	// HeldSince is when both parties had signed the lease.
	HeldSince time.Time `json:"held_since"`
	// Limit is the job's limit; EndsBy when the run reaches it at the
	// latest (the limit counts from the proposal), zero while an old
	// lease's run, whose limit counts from its start, has not started.
	Limit  Seconds   `json:"limit_seconds"`
	EndsBy time.Time `json:"ends_by,omitzero"`
	// Phase is where the lease stands: held, staging, running, output
	// or, until its runner lets it go, released.
	Phase string `json:"phase"`
	// RunStart is when the job's run started, zero before.
	RunStart time.Time `json:"run_start,omitzero"`
	// CheckpointAt is when the job's last checkpoint was taken, zero
	// where it has taken none; Checkpoints counts them.
	CheckpointAt time.Time `json:"checkpoint_at,omitzero"`
	Checkpoints  int       `json:"checkpoints,omitempty"`
	// Billed is what the receipts both parties signed so far hold and
	// make owed, under the default policy (ledger.Policy.Bill).
	Billed LeaseBilled `json:"billed"`
}

// Seconds is a length of time in seconds, for JSON.
type Seconds float64

// LeaseGPU is one GPU a lease holds.
type LeaseGPU struct {
	UUID  string `json:"uuid"`
	Model string `json:"model,omitempty"`
}

// LeaseBilled is what a lease's receipts hold and make owed, by the one
// sum the ledger bills with (ledger.Policy.Bill): GPU-hours and CPU-hours
// held, and the part of each owed.
type LeaseBilled struct {
	// Until is the end of the held time the receipts cover: the last
	// receipt's; zero before the first.
	Until        time.Time `json:"until,omitzero"`
	GPUHours     float64   `json:"gpu_hours"`
	OwedGPUHours float64   `json:"owed_gpu_hours"`
	CPUHours     float64   `json:"cpu_hours,omitempty"`
	OwedCPUHours float64   `json:"owed_cpu_hours,omitempty"`
	// Own says the lease is this node's own job on its own GPUs: held,
	// owed by no one.
	Own bool `json:"own,omitempty"`
}

// EndedLease is a lease this node provided that has ended, from the
// ledger, as GET /v1/leases?history=1 shows it (e31 leases --history).
type EndedLease struct {
	ID        string    `json:"id"`
	Job       string    `json:"job"`
	Submitter string    `json:"submitter"`
	GPUs      int       `json:"gpus"`
	GPUModel  string    `json:"gpu_model,omitempty"`
	HeldFrom  time.Time `json:"held_from"`
	HeldUntil time.Time `json:"held_until"`
	// Outcome and Attribution are how the lease ended and who caused it.
	Outcome     string `json:"outcome"`
	Attribution string `json:"attribution"`
	// Record is how the record it is counted by stands: two-sided,
	// one-sided or disputed (this node's version).
	Record string      `json:"record"`
	Billed LeaseBilled `json:"billed"`
}

// LeasesQuery narrows GET /v1/leases?history=1.
type LeasesQuery struct {
	// Since keeps the leases held at or after it; zero keeps all.
	Since time.Time
	// Max bounds how many, the newest first; 0 is the server's default.
	Max int
}

// Lease history bounds: how many ended leases a query lists when it says
// nothing, and at most.
const (
	DefaultLeaseHistory = 20
	MaxLeaseHistory     = 1000
)
