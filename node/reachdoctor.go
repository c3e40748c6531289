package node

import (
	"context"

	"github.com/e31network/e31/node/api"
	"github.com/e31network/e31/node/reach"
)

// doctorWithReach is the daemon's doctor (GET /v1/doctor, e31 doctor):
// e31d doctor's checks of the machine, and, from the running node, how
// peers reach it, as e31d doctor's reachability check says it. Nil where
// the daemon has no doctor.
func doctorWithReach(checks func(context.Context) api.DoctorReport, status func() reach.Status) func(context.Context) api.DoctorReport {
	if checks == nil {
		return nil
	}
	return func(ctx context.Context) api.DoctorReport {
		rep := checks(ctx)
		if c, ok := reachCheck(status()); ok {
			rep.Checks = append(rep.Checks, c)
		}
		return rep
	}
}

// reachCheck is the doctor's reachability check from the node's own
// status; ok is false where it runs no NAT traversal.
func reachCheck(s reach.Status) (api.DoctorCheck, bool) {
	c := api.DoctorCheck{Name: "reachability", Detail: s.Line() + " (this running daemon)"}
	switch s.State {
	case reach.StateOff:
		return c, false
	case reach.StatePublic, reach.StateRelayed:
		c.Status = api.DoctorOK
	case reach.StateUnreachable:
		c.Status, c.Detail, c.Fix = api.DoctorFail, "unreachable: "+reach.NoWork+"; "+s.Why+" (this running daemon)", s.Fix
	default:
		c.Status, c.Fix = api.DoctorWarn, "ask again in a minute: AutoNAT answers some 15 s after the daemon starts"
	}
	return c, true
}
