package api

import "time"

// DrainMode is how a drained node ends what runs on it (e31 drain).
type DrainMode string

// Drain modes.
const (
	// DrainGraceful lets running jobs go on to their end (or a deadline,
	// then DrainQuick).
	DrainGraceful DrainMode = "graceful"
	// DrainQuick stops each run with SIGTERM and its grace to write a last
	// checkpoint; the lease ends preempted and the job goes on elsewhere.
	DrainQuick DrainMode = "quick"
	// DrainNow is DrainQuick without the grace.
	DrainNow DrainMode = "now"
)

// DrainRequest drains the node (POST /v1/drain).
type DrainRequest struct {
	Mode DrainMode `json:"mode"`
	// Deadline, for a graceful drain, is how long running jobs may go on
	// before what still runs is drained quickly (a Go duration); empty:
	// no deadline.
	Deadline string `json:"deadline,omitempty"`
}

// Drain is a node's drain: the zero value (no Mode) when it takes work.
type Drain struct {
	Mode     DrainMode  `json:"mode,omitempty"`
	Since    time.Time  `json:"since,omitzero"`
	Deadline *time.Time `json:"deadline,omitempty"`
	// By says who drains the node: DrainByOwner (e31 drain, lifted by
	// e31 undrain alone), DrainByReclaim (the owner started using a GPU,
	// --reclaim-on-use: lifted once the GPUs are left alone), or
	// DrainByStop (the daemon is stopping).
	By string `json:"by,omitempty"`
	// Reason says why, where the node drained itself.
	Reason string `json:"reason,omitempty"`
	// Leases is how many leases the node still runs.
	Leases int `json:"leases"`
}

// Who drains a node (Drain.By).
const (
	DrainByOwner   = "owner"
	DrainByReclaim = "reclaim"
	DrainByStop    = "stop"
)
