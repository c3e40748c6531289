package api

// Verification is how a job's results are checked (a declaration's
// verify section) and what the check found: the replicas of a job run on
// distinct providers, or the spot checks of an array's tasks.
type Verification struct {
	// Mode is what is compared: "output" (the whole output folder's
	// CID), "paths:a,b" (those files' CIDs) or "command" (the user's
	// comparator, run as a job over two outputs).
	Mode string `json:"mode"`
	// State is "checking" until every replica has come back and been
	// compared, then "agreed", "disagreed" (no majority: the job failed)
	// or "settled" (a majority; the others lost).
	State string `json:"state"`
	// Replicas are the runs compared, the job as submitted first.
	Replicas []Replica `json:"replicas,omitempty"`
	// Reason says what the check found, in words.
	Reason string `json:"reason,omitempty"`
	// Spot, on an array, is the share of its tasks run again to check
	// them; Checks how many were drawn, Caught the providers a check
	// found out, and Rerun the tasks run again because their provider
	// was caught.
	Spot   float64  `json:"spot,omitempty"`
	Checks int      `json:"checks,omitempty"`
	Caught []string `json:"caught,omitempty"`
	Rerun  int      `json:"rerun,omitempty"`
}

// Replica is one run a verification compares.
type Replica struct {
	ID       string   `json:"id"`
	State    JobState `json:"state"`
	Outcome  string   `json:"outcome,omitempty"`
	Provider string   `json:"provider,omitempty"`
	Lease    string   `json:"lease,omitempty"`
	Output   string   `json:"output,omitempty"`
	// Compared is the value compared (a CID, or a digest of the compared
	// paths' CIDs); Lost says it was not the majority's.
	Compared string `json:"compared,omitempty"`
	Lost     bool   `json:"lost,omitempty"`
}
