package submitter

import (
	"fmt"
	"strings"

	"github.com/e31network/e31/ledger"
	"github.com/e31network/e31/market"
)

// decide compares the results: all alike, agreed; two that differ, State
// "" (a third must run); else the majority, or none.
func decide(results []ReplicaRun) Verdict {
	count := map[string]int{}
	for _, r := range results {
		count[r.Compared]++
	}
	d := Verdict{Results: results}
	winner := ""
	for c, n := range count {
		if 2*n > len(results) {
			winner = c
		}
	}
	switch {
	case len(count) == 1 && !results[0].hasOutput():
		d.State, d.Reason = verdictMoot, "no replica returned an output: "+string(results[0].Outcome)
		return d
	case len(count) == 1:
		d.State = verdictAgreed
	case len(results) < market.MaxReplicas:
		return Verdict{} // two that differ: a third decides
	case winner == "":
		d.State = verdictDisagreed
		d.Reason = "replicas disagree: " + whoReturned(results)
		return d
	default:
		d.State = verdictSettled
	}
	d.Winner = winner
	for i := range d.Results {
		r := &d.Results[i]
		r.Lost = r.Compared != winner
		if d.Output == "" && !r.Lost {
			d.Output = r.Output
		}
	}
	switch {
	case d.State == verdictAgreed:
		d.Reason = fmt.Sprintf("%d replicas agree", len(results))
	case d.Output == "":
		d.Reason = "the majority of replicas returned no output: " + whoReturned(results)
	default:
		d.Reason = "the majority of replicas agree; lost: " + whoReturned(lost(d.Results))
	}
	return d
}

func (r ReplicaRun) hasOutput() bool { return r.Outcome == ledger.OutcomeCompleted && r.Output != "" }

func lost(rs []ReplicaRun) []ReplicaRun {
	var out []ReplicaRun
	for _, r := range rs {
		if r.Lost {
			out = append(out, r)
		}
	}
	return out
}

// whoReturned names which provider returned what.
func whoReturned(rs []ReplicaRun) string {
	parts := make([]string, len(rs))
	for i, r := range rs {
		who := r.Provider
		if who == "" {
			who = "no provider"
		}
		parts[i] = fmt.Sprintf("%s returned %s", who, r.Compared)
	}
	return strings.Join(parts, "; ")
}

func providersOf(rs []ReplicaRun) []string {
	var out []string
	for _, r := range rs {
		if r.Provider != "" {
			out = append(out, r.Provider)
		}
	}
	return out
}
