package submitter

import "time"

// A gang (market.Request.Nodes) is an array whose tasks are its parts,
// placed by Match all at once on distinct providers. This node keeps a
// record for the gang, the handle its user follows, and one for each
// part, leased as a job of its own. What makes it a gang here:
//
//   - No part runs until every part is held. Once the last part's lease
//     is countersigned, this node names every part in one gang lease
//     (wire.GangLease), has each provider sign it, signs it last and
//     hands it to every provider, which then starts its part
//     (gangRun.assemble). A gang whose parts are not all leased and
//     started within gangAssembleWithin gives its leases up, unrun and
//     owed by no one, and goes back to the queue whole (gangRun.check).
//   - Failure is the gang's: a part that ends any way but completed ends
//     the others, each stopped with its grace to write a last checkpoint,
//     which is pulled (gangRun.check). The gang ends as that part did, and
//     says which part.
//   - resume: auto goes on with the whole gang, each part from its own
//     last checkpoint (gangs.resumeWhole); no part goes on by itself.
//
// Each gang attempt not yet over has its gangRun (gangrun.go), as each
// allocation in nomad has its alloc runner above its task runners: it
// drives the trackers of the gang's parts, in its own loop, and no part's
// tracker knows its siblings. The gangs registry (gangs.go) holds the
// runs, and the parts of a gang that need no run: its view
// (gang_view.go), its resumption and its withdrawal (gang_resume.go).

// gangAssembleWithin bounds how long the leased parts of a gang wait for
// the others, and for the gang lease's signatures, before they are given
// up and the gang queued again: Match assigns every part in one pass, so
// every part's provider proposes within a proposal's lifetime.
func (c *Config) gangAssembleWithin() time.Duration {
	return max(3*c.ProposalTTL, 20*time.Second)
}

// gangCallTimeout bounds one call of the gang lease's: a signature, or
// the start, answered from memory.
func (c *Config) gangCallTimeout() time.Duration { return 15 * time.Second }

// gangStartAgain is how often a gang whose parts are not all running yet
// is handed its start again, in case it was not delivered.
const gangStartAgain = 15 * time.Second

// isGang reports whether the record is a gang's, not a part's.
func (r *Record) isGang() bool { return r.isArray() && r.Declaration.Request.Gang() }

// gangPart reports whether the record is a part of a gang.
func (r *Record) gangPart() bool { return r.Array != "" && r.Declaration.Request.Gang() }

// isGangTracker reports whether the job is a gang's record.
func (j *jobTracker) isGangTracker() bool {
	var gang bool
	j.view(func(r *Record) { gang = r.isGang() })
	return gang
}

// isGangPart reports whether the job is a part of a gang.
func (j *jobTracker) isGangPart() bool {
	var part bool
	j.view(func(r *Record) { part = r.gangPart() })
	return part
}
