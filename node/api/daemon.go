package api

import "time"

// ID describes the daemon answering.
type ID struct {
	PeerID  string `json:"peer_id"`
	Network string `json:"network"`
	// Shard is the part of the network's market the daemon takes part
	// in, "INDEX/COUNT": its offers, and the jobs submitted to it, are
	// matched within that shard. "0/1" is the whole network.
	Shard   string    `json:"shard"`
	Addrs   []string  `json:"addrs"`
	GPUs    []GPU     `json:"gpus"`
	Runtime string    `json:"runtime,omitempty"` // OCI runtime path; empty: this node offers no compute
	Started time.Time `json:"started"`
	Version string    `json:"version"`
	// Drain is the owner's drain of the node (e31 drain); nil while it
	// takes work.
	Drain *Drain `json:"drain,omitempty"`
	// Hours are the node's contribution hours (e31d --hours), empty when
	// it lends its GPUs at any time; Closed says it is outside them now,
	// OpenUntil when the open window ends.
	Hours     string     `json:"hours,omitempty"`
	Closed    bool       `json:"closed,omitempty"`
	OpenUntil *time.Time `json:"open_until,omitempty"`
	// Disk is how the data dir's disk stands, and what of it this node
	// lends its jobs; nil where it does not say.
	Disk *Disk `json:"disk,omitempty"`
	// NoCPUJobs says this node takes only jobs that ask for GPUs.
	NoCPUJobs bool `json:"no_cpu_jobs,omitempty"`
	// Reachability is how peers reach this node; nil where it runs no
	// NAT traversal (--nat off, or it listens on loopback alone).
	Reachability *Reachability `json:"reachability,omitempty"`
}

// Reachability is how peers reach a node, as it tells its owner.
type Reachability struct {
	// State is public (peers dial it), relayed (through Relays, until a
	// hole is punched), unreachable (no peer can: it gets no work) or
	// unknown (not learned yet).
	State  string   `json:"state"`
	Relays []string `json:"relays,omitempty"`
	// Why says what the state rests on; Fix, when unreachable, what to
	// change; Line is all of it in one line, as e31 id prints it.
	Why  string `json:"why,omitempty"`
	Fix  string `json:"fix,omitempty"`
	Line string `json:"line"`
}

// Disk is the data dir's disk as a provider lends it (node/diskroom).
type Disk struct {
	// Size and Free are the filesystem's, in bytes.
	Size uint64 `json:"size"`
	Free uint64 `json:"free"`
	// Reserve is what no job may take; Promised what the jobs holding a
	// grant may still take; Lendable what is left.
	Reserve  uint64 `json:"reserve"`
	Promised uint64 `json:"promised"`
	Lendable uint64 `json:"lendable"`
	// MaxJobDisk is the largest request.disk this node can grant now,
	// within Cap, the largest it takes at all.
	MaxJobDisk uint64 `json:"max_job_disk"`
	Cap        uint64 `json:"cap"`
	// NoDisk says why it lends none ("full", "unbounded"), Why in words;
	// empty while it lends.
	NoDisk string `json:"no_disk,omitempty"`
	Why    string `json:"why,omitempty"`
	// Jobs is how many jobs hold a grant of it.
	Jobs int `json:"jobs"`
}
