package jobstate

// State is where a job stands, as its submitter sees it.
type State string

// Job states.
const (
	Queued    State = "queued"
	Renting   State = "renting"
	Running   State = "running"
	Output    State = "output"
	Released  State = "released"
	Rejected  State = "rejected"
	Withdrawn State = "withdrawn"
)

// States lists every job state, for metrics and tests.
var States = [...]State{Queued, Renting, Running, Output, Released, Rejected, Withdrawn}

// Terminal says whether a job in this state is over.
func (s State) Terminal() bool {
	return s == Released || s == Rejected || s == Withdrawn
}
