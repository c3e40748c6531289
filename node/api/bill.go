package api

// JobIDs is every job ID the ledger may hold leases under for what a user
// submitted under one ID (a job, an array, a task, a gang, a held job, a
// pipeline's stage): each attempt, retry and resumption, each task and
// each of its attempts, and the ID a held job was announced with. Usage,
// receipts and export of a job read the ledger through it.
type JobIDs struct {
	// ID is the job as the user knows it, its ID resolved from a prefix.
	ID string `json:"id"`
	// IDs are the ledger's job IDs of every attempt and task, each once.
	IDs []string `json:"ids"`
	// Tasks are an array's (or a gang's) tasks, by index; empty for a job
	// that is none.
	Tasks []TaskIDs `json:"tasks,omitempty"`
}

// TaskIDs are the job IDs of one task's attempts, first to last, and how
// its last attempt stands.
type TaskIDs struct {
	Index       int      `json:"index"`
	ID          string   `json:"id"`
	IDs         []string `json:"ids"`
	State       JobState `json:"state"`
	Outcome     string   `json:"outcome,omitempty"`
	Attribution string   `json:"attribution,omitempty"`
}

// JobUsage is what GET /v1/usage?job=ID&tasks=1 answers (e31 usage --job
// ID --tasks): held and owed per task of an array, as sacct -j shows them,
// each summed over the task's attempts by the ledger's one sum, and the
// whole job's.
type JobUsage struct {
	ID    string      `json:"id"`
	Tasks []TaskUsage `json:"tasks"`
	// Total is the job's, every task and attempt summed.
	Total TaskUsage `json:"total"`
}

// TaskUsage is one task's held and owed time, over its attempts.
type TaskUsage struct {
	// Index is the task's index in its array (market.Array.Index); -1
	// on a total.
	Index int    `json:"index"`
	ID    string `json:"id,omitempty"`
	// Attempts counts the task's attempts; Leases the leases they held.
	Attempts int `json:"attempts"`
	Leases   int `json:"leases"`
	// State, Outcome and Attribution are the last attempt's: how the task
	// ended, or stands.
	State           JobState `json:"state,omitempty"`
	Outcome         string   `json:"outcome,omitempty"`
	Attribution     string   `json:"attribution,omitempty"`
	GPUHours        float64  `json:"gpu_hours"`
	OwedGPUHours    float64  `json:"owed_gpu_hours"`
	NotOwedGPUHours float64  `json:"not_owed_gpu_hours"`
	CPUHours        float64  `json:"cpu_hours"`
	OwedCPUHours    float64  `json:"owed_cpu_hours"`
	// LostGPUHours is the part of NotOwedGPUHours held by replicas a
	// verdict found against the majority.
	LostGPUHours float64 `json:"lost_verification_gpu_hours,omitempty"`
}
