package api

import (
	"encoding/json"

	"github.com/e31network/e31/market"
)

// SubmitRequest asks the daemon to submit a declaration. Local data sources
// must be absolute paths; the daemon imports them.
type SubmitRequest struct {
	Declaration json.RawMessage `json:"declaration"`
	// ResumeOf, with an empty Declaration, resubmits that job from its last
	// checkpoint. With a Declaration, the next attempts run that
	// declaration instead (e31 resume --with): for an array, each task
	// chosen runs its task of it, under its own index.
	ResumeOf string `json:"resume_of,omitempty"`
	// Tasks, with ResumeOf an array, are the indices of the tasks to run
	// again; none: those that failed.
	Tasks []int `json:"tasks,omitempty"`
	// Image, with ResumeOf, replaces the image the next attempts run in
	// (a reference as work.image takes); Data replace the inputs mounted
	// at the same paths and add the others. Both change the job's own
	// declaration; neither goes with a Declaration.
	Image string         `json:"image,omitempty"`
	Data  []market.Input `json:"data,omitempty"`
	// FromStart, with ResumeOf, resubmits that job's declaration as it was
	// first submitted, to run again from the beginning: a job that declares
	// no checkpoints, or was lost before its first.
	FromStart bool `json:"from_start,omitempty"`
	// Secrets are the values of the declaration's secrets (market.Secret),
	// by name, read by the client with its caller's rights: they go to the
	// daemon apart from the declaration, which is signed and broadcast
	// with their names alone. With ResumeOf they replace the values the
	// daemon kept, which it drops once the job has ended for good.
	Secrets map[string][]byte `json:"secrets,omitempty"`
}

// SubmitEvent is one line of the NDJSON stream that answers a submit:
// progress of input imports, then the job or an error.
type SubmitEvent struct {
	Progress *Transfer `json:"progress,omitempty"`
	Job      *Job      `json:"job,omitempty"`
	Error    string    `json:"error,omitempty"`
}
