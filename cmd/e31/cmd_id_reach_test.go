package main

import (
	"strings"
	"testing"

	"github.com/e31network/e31/node/api"
)

func TestDescribeReach(t *testing.T) {
	for _, tc := range []struct {
		r    api.Reachability
		want string
	}{
		{api.Reachability{State: "public", Line: "public: peers dial this node directly"}, "public: peers dial this node directly"},
		{api.Reachability{State: "relayed", Relays: []string{"12D3KooWR"}}, "relayed through 12D3KooWR"},
		{api.Reachability{State: "unreachable", Line: "no peer can reach this node: it gets no work; behind a NAT; fix: forward"},
			"unreachable: no peer can reach this node: it gets no work; behind a NAT; fix: forward"},
		{api.Reachability{State: "unknown", Line: "unknown: AutoNAT has not yet learned"}, "unknown: AutoNAT has not yet learned"},
	} {
		if got := describeReach(tc.r); got != tc.want {
			t.Errorf("describeReach(%+v) = %q, want %q", tc.r, got, tc.want)
		}
	}
	if !strings.HasPrefix(describeReach(api.Reachability{State: "unreachable", Line: "x"}), "unreachable: ") {
		t.Error("an unreachable node is not named so")
	}
}
