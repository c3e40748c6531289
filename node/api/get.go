package api

// GetRequest asks the daemon to write a job's output (or last checkpoint)
// into Dir.
type GetRequest struct {
	Dir        string `json:"dir"`
	Checkpoint bool   `json:"checkpoint"`
	// Attempt picks one attempt of a resumed job by its number (1 for the
	// job as submitted); 0 means the whole job, whose output and
	// checkpoint are its last attempt's.
	Attempt int `json:"attempt,omitempty"`
}

// GetResult says what was written.
type GetResult struct {
	CID   string `json:"cid"`
	Dir   string `json:"dir"`
	Bytes int64  `json:"bytes"`
}
