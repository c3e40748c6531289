package node

import (
	"context"
	"strings"
	"testing"

	"github.com/e31network/e31/node/api"
	"github.com/e31network/e31/node/reach"
	"github.com/e31network/e31/p2p"
)

func TestDoctorWithReach(t *testing.T) {
	machine := func(context.Context) api.DoctorReport {
		return api.DoctorReport{Checks: []api.DoctorCheck{{Name: "root", Status: api.DoctorOK}}}
	}
	if doctorWithReach(nil, nil) != nil {
		t.Error("a daemon with no doctor got one")
	}
	for _, tc := range []struct {
		f      reach.Facts
		status api.DoctorStatus // "": no reachability check
		detail string
	}{
		{reach.Facts{}, "", ""},
		{reach.Facts{Traversal: true, Reach: p2p.ReachPublic}, api.DoctorOK, "public"},
		{reach.Facts{Traversal: true, Reach: p2p.ReachPrivate, Boot: 1}, api.DoctorFail, "unreachable: " + reach.NoWork},
		{reach.Facts{Traversal: true}, api.DoctorWarn, "unknown"},
	} {
		rep := doctorWithReach(machine, func() reach.Status { return reach.Explain(tc.f) })(context.Background())
		last := rep.Checks[len(rep.Checks)-1]
		if tc.status == "" {
			if len(rep.Checks) != 1 {
				t.Errorf("%+v: checks %+v, want the machine's alone", tc.f, rep.Checks)
			}
			continue
		}
		if len(rep.Checks) != 2 || last.Name != "reachability" || last.Status != tc.status || !strings.HasPrefix(last.Detail, tc.detail) ||
			(last.Status != api.DoctorOK) != (last.Fix != "") {
			t.Errorf("%+v: checks %+v", tc.f, rep.Checks)
		}
	}
}
