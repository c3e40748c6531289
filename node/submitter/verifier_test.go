package submitter

import (
	"strings"
	"testing"
	"time"

	"github.com/e31network/e31/ledger"
)

func TestDecide(t *testing.T) {
	ok := func(p, c string) ReplicaRun {
		return ReplicaRun{Job: "j" + p, Provider: p, Lease: "l" + p, Output: "out-" + c, Outcome: ledger.OutcomeCompleted, Compared: c}
	}
	failed := func(p string) ReplicaRun {
		return ReplicaRun{Job: "j" + p, Provider: p, Outcome: ledger.OutcomeFailed, Compared: "no output: failed"}
	}
	for _, c := range []struct {
		name    string
		in      []ReplicaRun
		state   string
		winner  string
		lost    []string
		reason  string
		outputs string
	}{
		{name: "two agree", in: []ReplicaRun{ok("a", "X"), ok("b", "X")}, state: verdictAgreed, winner: "X", outputs: "out-X"},
		{name: "two differ: a third", in: []ReplicaRun{ok("a", "X"), ok("b", "Y")}, state: ""},
		{name: "one failed, one completed: a third", in: []ReplicaRun{ok("a", "X"), failed("b")}, state: ""},
		{name: "majority of three", in: []ReplicaRun{ok("a", "X"), ok("b", "Y"), ok("c", "X")}, state: verdictSettled, winner: "X", lost: []string{"b"}, outputs: "out-X", reason: "b returned Y"},
		{name: "the first lost", in: []ReplicaRun{ok("a", "Y"), ok("b", "X"), ok("c", "X")}, state: verdictSettled, winner: "X", lost: []string{"a"}, outputs: "out-X"},
		{name: "no majority", in: []ReplicaRun{ok("a", "X"), ok("b", "Y"), ok("c", "Z")}, state: verdictDisagreed, reason: "replicas disagree: a returned X; b returned Y; c returned Z"},
		{name: "all failed alike", in: []ReplicaRun{failed("a"), failed("b")}, state: verdictMoot, reason: "no replica returned an output"},
		{name: "majority failed", in: []ReplicaRun{failed("a"), ok("b", "X"), failed("c")}, state: verdictSettled, winner: "no output: failed", lost: []string{"b"}, reason: "the majority of replicas returned no output"},
	} {
		t.Run(c.name, func(t *testing.T) {
			d := decide(c.in)
			if d.State != c.state {
				t.Fatalf("state %q, want %q (%s)", d.State, c.state, d.Reason)
			}
			if d.Winner != c.winner {
				t.Errorf("winner %q, want %q", d.Winner, c.winner)
			}
			if d.Output != c.outputs {
				t.Errorf("output %q, want %q", d.Output, c.outputs)
			}
			var lostBy []string
			for _, r := range d.Results {
				if r.Lost {
					lostBy = append(lostBy, r.Provider)
				}
			}
			if strings.Join(lostBy, ",") != strings.Join(c.lost, ",") {
				t.Errorf("lost %v, want %v", lostBy, c.lost)
			}
			if !strings.Contains(d.Reason, c.reason) {
				t.Errorf("reason %q, want it to say %q", d.Reason, c.reason)
			}
		})
	}
}

func TestDistrustGrows(t *testing.T) {
	want := []time.Duration{DistrustFor, 2 * DistrustFor, 4 * DistrustFor, 8 * DistrustFor, MaxDistrustFor, MaxDistrustFor}
	for n, w := range want {
		if got := distrustFor(n + 1); got != w {
			t.Errorf("loss %d: %s, want %s", n+1, got, w)
		}
	}
}

func TestChanceIsAShare(t *testing.T) {
	for range 10000 {
		if c := chance(); c < 0 || c >= 1 {
			t.Fatalf("chance %v outside [0, 1)", c)
		}
	}
}
