package api

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/e31network/e31/market"
)

// Error is the body of every failed request.
type Error struct {
	Error string `json:"error"`
}

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

// Peer is a connected libp2p peer.
type Peer struct {
	PeerID string   `json:"peer_id"`
	Addrs  []string `json:"addrs"`
	// Path is how this node reaches the peer: direct (dialled, or a hole
	// punched through NATs), relayed (only through a circuit relay, which
	// carries control messages but no data), or none.
	Path string `json:"path"`
	// PathReason says, for a relayed path, what the last hole punch with
	// the peer said.
	PathReason string `json:"path_reason,omitempty"`
	// Struck, on a submitter this node's provider struck off (it refused
	// or never answered receipts, disputed a final one, or left gangs
	// unassembled), says until when it gets no new work from this node,
	// and why. A struck peer is listed whether connected or not (Path
	// "none").
	Struck *Strike `json:"struck,omitempty"`
}

// Strike is what a provider holds against a submitter (node/provider).
type Strike struct {
	Count int       `json:"count"`
	Until time.Time `json:"until"`
	Why   string    `json:"why"`
}

// GPU is one GPU of an offer, as `e31 nodes --json` prints it.
type GPU struct {
	Index       int    `json:"index"`
	UUID        string `json:"uuid"`
	Model       string `json:"model"`
	MemoryBytes uint64 `json:"memory_bytes"`
	Free        bool   `json:"free"`
}

// Node is one provider in this node's view of offers.
type Node struct {
	PeerID      string    `json:"peer_id"`
	GPUs        []GPU     `json:"gpus"`
	CPUs        int       `json:"cpus"`
	MemoryBytes uint64    `json:"memory_bytes"`
	LastSeen    time.Time `json:"last_seen"`
	// SignedAt is when the provider signed the offer last seen; LastSeen
	// minus SignedAt is how long gossip took to bring it here.
	SignedAt time.Time `json:"signed_at"`
	Self     bool      `json:"self,omitempty"`
	// Reach is how peers reach the provider: public, relayed (through a
	// relay until a hole is punched), private (no one can: offered no
	// work), or empty when not known.
	Reach string `json:"reach,omitempty"`
	// Draining says the provider's owner drains it: it takes no new work.
	Draining bool `json:"draining,omitempty"`
	// Closed says the provider is outside its contribution hours;
	// OpenUntil is when its open window ends, where it has hours.
	Closed    bool       `json:"closed,omitempty"`
	OpenUntil *time.Time `json:"open_until,omitempty"`
	// MaxJobDisk is the largest request.disk the provider can grant now
	// (0: it names no cap); NoDisk why it lends none ("full": its disk is
	// under its reserve or promised to its jobs; "unbounded": it cannot
	// bound a job's disk), and so takes no job. NoCPUJobs says it takes
	// only jobs that ask for GPUs.
	MaxJobDisk uint64 `json:"max_job_disk,omitempty"`
	NoDisk     string `json:"no_disk,omitempty"`
	NoCPUJobs  bool   `json:"no_cpu_jobs,omitempty"`
	// Held are the largest roots the provider's offer says it holds, with
	// their sizes in bytes; HeldFiltered says its filter holds more.
	Held         []HeldRoot `json:"held,omitempty"`
	HeldFiltered bool       `json:"held_filtered,omitempty"`
}

// HeldRoot is one root an offer says its provider holds.
type HeldRoot struct {
	Root string `json:"root"`
	Size uint64 `json:"size"`
}

// Step is one of the five steps of a job and when it was reached.
type Step struct {
	Step StepName  `json:"step"`
	At   time.Time `json:"at"`
}

// Transfer is the progress of a data transfer.
type Transfer struct {
	What  string `json:"what"`
	Done  int64  `json:"done"`
	Total int64  `json:"total"`
}

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

// TaskCounts counts an array's tasks, each by the state of its last
// attempt: queued (renting included), running (output included),
// completed, failed (rejected included) and withdrawn.
type TaskCounts struct {
	// ID is the array's own, which its tasks' IDs start with: the job's
	// ID, unless the array was held for upstreams under an ID of its
	// submitter's making.
	ID        string `json:"id"`
	Total     int    `json:"total"`
	Queued    int    `json:"queued"`
	Running   int    `json:"running"`
	Completed int    `json:"completed"`
	Failed    int    `json:"failed"`
	Withdrawn int    `json:"withdrawn"`
	// FailedIndices lists the failed tasks, lowest first.
	FailedIndices []int `json:"failed_indices,omitempty"`
	// Done traces the completions over time, for a plot: how many tasks
	// had completed by each time, at most MaxDonePoints points, the last
	// at the latest completion.
	Done []DonePoint `json:"done,omitempty"`
}

// MaxDonePoints bounds TaskCounts.Done, whatever the array's size.
const MaxDonePoints = 64

// DonePoint is how many of an array's tasks had completed by a time.
type DonePoint struct {
	At   time.Time `json:"at"`
	Done int       `json:"done"`
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
	Checkpoint  string `json:"checkpoint,omitempty"` // the last it took
	Output      string `json:"output,omitempty"`
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

// Held is what a job's leases held, summed over its attempts.
type Held struct {
	HeldMs    int64    `json:"held_ms"`
	Providers []string `json:"providers"`
	GPUHours  float64  `json:"gpu_hours"`
	// OwedGPUHours is the part the default policy makes owed (e31 usage
	// describes it).
	OwedGPUHours     float64 `json:"owed_gpu_hours"`
	OneSidedGPUHours float64 `json:"one_sided_gpu_hours,omitempty"`
	// CPUHours is the CPUs held times the time, where receipts say, and
	// OwedCPUHours the part owed: all a job without GPUs held.
	CPUHours     float64 `json:"cpu_hours,omitempty"`
	OwedCPUHours float64 `json:"owed_cpu_hours,omitempty"`
}

// GPUSeen is one GPU a run saw: its UUID and model as the driver names it.
type GPUSeen struct {
	UUID  string `json:"uuid"`
	Model string `json:"model"`
}

// SubmitRequest asks the daemon to submit a declaration. Local data sources
// must be absolute paths; the daemon imports them.
type SubmitRequest struct {
	Declaration json.RawMessage `json:"declaration"`
	// ResumeOf, with an empty Declaration, resubmits that job from its last
	// checkpoint.
	ResumeOf string `json:"resume_of,omitempty"`
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

// Receipts is the answer to a receipts query.
type Receipts struct {
	// Receipts is a JSON array of ledger receipts, in ledger order: those
	// both parties signed and one-sided records (which carry "signer").
	Receipts json.RawMessage `json:"receipts"`
	// Superseded lists the positions in Receipts of one-sided records that
	// a two-sided final receipt of their lease later settled. They stay in
	// the ledger, which is append-only, but no longer count.
	Superseded []int `json:"superseded,omitempty"`
	// Disputes are the ledger's disputes, in ledger order.
	Disputes []Dispute `json:"disputes,omitempty"`
	Verify   *Verify   `json:"verify,omitempty"`
}

// Dispute is a lease whose parties signed different ends, both kept.
type Dispute struct {
	Index uint64 `json:"index"` // the dispute's entry in the ledger
	Lease string `json:"lease"`
	// Ours and Theirs are ledger receipts, each signed by one party: this
	// node's version of the end and the counterpart's.
	Ours   json.RawMessage `json:"ours"`
	Theirs json.RawMessage `json:"theirs"`
	// Superseded: a two-sided final receipt later settled the lease.
	Superseded bool `json:"superseded,omitempty"`
}

// Verify is the result of checking the ledger.
type Verify struct {
	Entries int `json:"entries"`
	// OneSided counts one-sided records no two-sided final receipt has
	// settled; Disputed, leases disputed and not settled since.
	OneSided int `json:"one_sided"`
	Disputed int `json:"disputed"`
	// Unbounded counts leases whose receipts no terms bound (signed
	// before held time was bounded by the lease): their held time is
	// not checked.
	Unbounded int    `json:"unbounded"`
	OK        bool   `json:"ok"`
	Problem   string `json:"problem,omitempty"`
}

// Match is one epoch's Match result on a node: what it decided, with the
// hash of the view it decided on. Peers holding the same view decide the
// same.
type Match struct {
	Epoch    uint64 `json:"epoch"`
	ViewHash string `json:"view_hash"`
	Jobs     int    `json:"jobs"`
	// DelayMs is the epoch delay the view was cut with.
	DelayMs     int64               `json:"delay_ms"`
	Assignments []market.Assignment `json:"assignments"`
	// Fast marks a pass between epochs, on the view as it stood then
	// (straight to rent), rather than an epoch's frozen view.
	Fast bool `json:"fast,omitempty"`
	// CutMs is how long cutting the pass's view took on this node (zero
	// for a pass between epochs), MatchMs how long Match took on it.
	CutMs   float64 `json:"cut_ms,omitempty"`
	MatchMs float64 `json:"match_ms,omitempty"`
}

// Block names the peers a node refuses to connect with; empty heals.
type Block struct {
	Peers []string `json:"peers"`
}

// Image is an image imported into the daemon's store (e31 image ls).
type Image struct {
	CID string `json:"cid"`
	// Ref is the reference it was imported from.
	Ref string `json:"ref"`
	// Pinned is the registry reference pinned to its digest, if it came
	// from a registry.
	Pinned   string    `json:"pinned,omitempty"`
	Digest   string    `json:"digest,omitempty"`
	Platform string    `json:"platform,omitempty"`
	Size     int64     `json:"size"`
	Layers   int       `json:"layers"`
	Created  time.Time `json:"created,omitzero"`
}

// ImageImportRequest asks the daemon to import an image: oci:PATH,
// oci-archive:PATH, docker-archive:PATH (absolute paths),
// docker://REGISTRY/REPO[:TAG] or a CID it holds.
type ImageImportRequest struct {
	Ref string `json:"ref"`
}

// ImageEvent is one line of the NDJSON stream that answers an import:
// progress, then the image or an error.
type ImageEvent struct {
	Progress *Transfer `json:"progress,omitempty"`
	Image    *Image    `json:"image,omitempty"`
	Error    string    `json:"error,omitempty"`
}

// ParseSince reads a since bound as the CLI and the API take it: empty (no
// bound), an RFC 3339 time, or a duration back from now.
func ParseSince(v string, now time.Time) (time.Time, error) {
	if v == "" {
		return time.Time{}, nil
	}
	if t, err := time.Parse(time.RFC3339Nano, v); err == nil {
		return t, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d < 0 {
		return time.Time{}, fmt.Errorf("since %q: want a duration back from now (24h, 90m) or an RFC 3339 time (2026-11-29T14:00:00Z)", v)
	}
	return now.Add(-d), nil
}

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
