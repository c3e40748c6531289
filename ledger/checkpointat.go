package ledger

import (
	"errors"
	"time"
)

// A final receipt may say when its last checkpoint was taken
// (Receipt.CheckpointAt). A lease whose provider took its GPUs back
// (OutcomePreempted) ends by no fault of the job's, but the run's work up
// to that checkpoint is kept: the job goes on from it elsewhere. The
// default policy charges that part of the held time and not the rest
// (Policy.OwedToCheckpoint); a preempted job that kept no checkpoint
// starts again and owes nothing.

// checkpointAtText is CheckpointAt as JSON names it: "" when unset.
func checkpointAtText(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return msTime(t).Format(timeLayout)
}

func validateCheckpointAt(r *Receipt) error {
	switch {
	case r.CheckpointAt.IsZero():
		return nil
	case !r.Final:
		return errors.New("checkpoint_at: only a final receipt says when its last checkpoint was taken")
	case r.Checkpoint == "":
		return errors.New("checkpoint_at: set on a receipt that names no checkpoint")
	case msTime(r.CheckpointAt).Before(msTime(r.HeldFrom)) || msTime(r.CheckpointAt).After(msTime(r.HeldUntil)):
		return errors.New("checkpoint_at: outside the held time")
	}
	return nil
}

// owedHeld is the part of r's held interval at or after since that policy
// makes owed: all of it, none of it, or for an ending owed up to its last
// checkpoint, the part before CheckpointAt. A lease with no final record
// yet is owed so far as OpenOwed says.
func (p Policy) owedHeld(r *Receipt, since time.Time) time.Duration {
	if !r.Final {
		if p.OpenOwed {
			return heldSince(r, since)
		}
		return 0
	}
	c := Cause{r.Outcome, r.Attribution}
	switch {
	case p.Owes(c):
		return heldSince(r, since)
	case p.owesToCheckpoint(c) && !r.CheckpointAt.IsZero():
		upTo := *r
		upTo.HeldUntil = r.CheckpointAt
		return heldSince(&upTo, since)
	}
	return 0
}

func (p Policy) owesToCheckpoint(c Cause) bool {
	for _, o := range p.OwedToCheckpoint {
		if o == c {
			return true
		}
	}
	return false
}
