package main

import (
	"fmt"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/e31network/e31/market"
	"github.com/e31network/e31/node/api"
	"github.com/spf13/pflag"
)

// jobSelection picks jobs of this node's list by state, name and age: what
// `e31 list` shows and `e31 withdraw` takes back when named by selection.
type jobSelection struct {
	states []string
	name   string   // a shell pattern (path.Match)
	since  string   // a duration back from now or an RFC 3339 time
	labels []string // KEY=VALUE, every one required
}

// addFlags adds --state, --name and --since; what is the verb's object
// ("list", "withdraw") in their help.
func (s *jobSelection) addFlags(f *pflag.FlagSet, what string) {
	f.StringSliceVar(&s.states, "state", nil, what+" only jobs in these states (repeatable or comma-separated: "+strings.Join(stateNames(), ", ")+")")
	f.StringVar(&s.name, "name", "", what+" only jobs whose name matches this shell pattern ('sweep-*')")
	f.StringVar(&s.since, "since", "", what+" only jobs submitted since then: a duration back from now (2h) or an RFC 3339 time")
	f.StringArrayVar(&s.labels, "label", nil, what+" only jobs with this label, KEY=VALUE (repeatable: every one)")
}

// set reports whether any selection flag was given.
func (s *jobSelection) set() bool {
	return len(s.states) > 0 || s.name != "" || s.since != "" || len(s.labels) > 0
}

// matcher checks the flags and returns the test a job must pass.
func (s *jobSelection) matcher(now time.Time) (func(api.Job) bool, error) {
	for _, st := range s.states {
		if !slices.Contains(api.JobStates[:], api.JobState(st)) {
			return nil, fmt.Errorf("--state %q: not a job state (want one of %s)", st, strings.Join(stateNames(), ", "))
		}
	}
	if s.name != "" {
		if _, err := path.Match(s.name, ""); err != nil {
			return nil, fmt.Errorf("--name %q: %w", s.name, err)
		}
	}
	since, err := api.ParseSince(s.since, now) // its error names --since's value
	if err != nil {
		return nil, err
	}
	want := map[string]string{}
	for _, kv := range s.labels {
		k, v, err := market.ParseLabel(kv)
		if err != nil {
			return nil, fmt.Errorf("--label: %w", err)
		}
		want[k] = v
	}
	return func(j api.Job) bool {
		if len(s.states) > 0 && !slices.Contains(s.states, string(j.State)) {
			return false
		}
		if s.name != "" {
			if ok, _ := path.Match(s.name, j.Name); !ok {
				return false
			}
		}
		for k, v := range want {
			if got, ok := j.Labels[k]; !ok || got != v {
				return false
			}
		}
		return since.IsZero() || !j.Submitted.Before(since)
	}, nil
}

func stateNames() []string {
	out := make([]string, len(api.JobStates))
	for i, st := range api.JobStates {
		out[i] = string(st)
	}
	return out
}
