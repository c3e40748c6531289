package exec

import (
	"errors"
	"regexp"
	"strings"
	"testing"
	"time"
)

func TestSpecDefaultsAndValidation(t *testing.T) {
	good := func() Spec {
		return Spec{
			ID:      "L1",
			Dir:     "/var/lib/e31/leases/L1",
			Command: []string{"python3", "train.py"},
			Inputs:  []Mount{{Source: "/var/lib/e31/content/abc", Target: "/data/"}},
			Output:  Mount{Source: "/var/lib/e31/leases/L1/out", Target: "/out"},
		}
	}
	s, err := good().withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	if s.Pids != DefaultPids || s.Grace != DefaultGrace || s.LogCap != DefaultLogCap || s.Inputs[0].Target != "/data" {
		t.Errorf("defaults not applied: %+v", s)
	}
	orig := good()
	orig.withDefaults()
	if orig.Inputs[0].Target != "/data/" {
		t.Error("withDefaults changed the caller's Inputs")
	}

	cases := []struct {
		name   string
		change func(*Spec)
		want   string
	}{
		{"no id", func(s *Spec) { s.ID = "" }, "no ID"},
		{"relative dir", func(s *Spec) { s.Dir = "leases/L1" }, "not absolute"},
		{"no command", func(s *Spec) { s.Command = nil }, "no command"},
		{"bad env", func(s *Spec) { s.Env = map[string]string{"A=B": "x"} }, "environment"},
		{"negative", func(s *Spec) { s.Limit = -time.Second }, "negative"},
		{"relative source", func(s *Spec) { s.Inputs[0].Source = "content/abc" }, "absolute host path"},
		{"root target", func(s *Spec) { s.Output.Target = "/" }, "below /"},
		{"relative target", func(s *Spec) { s.Output.Target = "out" }, "below /"},
		{"proc target", func(s *Spec) { s.Inputs[0].Target = "/proc/self" }, "reserves"},
		{"usr target", func(s *Spec) { s.Inputs[0].Target = "/usr/local/data" }, "reserves"},
		{"etc target", func(s *Spec) { s.Inputs[0].Target = "/etc/passwd" }, "reserves"},
		{"dotdot into dev", func(s *Spec) { s.Inputs[0].Target = "/data/../dev/x" }, "reserves"},
		{"twice", func(s *Spec) { s.Output.Target = "/data" }, "twice"},
		{"checkpoint twice", func(s *Spec) { s.Checkpoint = &Mount{Source: "/x", Target: "/out"} }, "twice"},
		{"source in bundle", func(s *Spec) { s.Output.Source = "/var/lib/e31/leases/L1/bundle/out" }, "bundle"},
		{"real gpu no minor", func(s *Spec) { s.GPUs = []GPU{{UUID: "GPU-x", Minor: -1}} }, "minor"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := good()
			c.change(&s)
			_, err := s.withDefaults()
			if !errors.Is(err, ErrSpec) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err = %v, want ErrSpec mentioning %q", err, c.want)
			}
		})
	}
}

func TestContainerID(t *testing.T) {
	safe := regexp.MustCompile(`^e31-[A-Za-z0-9_.-]{1,24}-[0-9a-f]{16}$`)
	ids := []string{"L1", "lease/with/slashes", "a b c", strings.Repeat("x", 200), strings.Repeat("x", 201), "ünïcode", "L1 "}
	seen := map[string]string{}
	for _, id := range ids {
		c := ContainerID(id)
		if !safe.MatchString(c) {
			t.Errorf("ContainerID(%q) = %q: not a safe short name", id, c)
		}
		if c != ContainerID(id) {
			t.Errorf("ContainerID(%q) not stable", id)
		}
		if prev, ok := seen[c]; ok {
			t.Errorf("ContainerID(%q) = ContainerID(%q)", id, prev)
		}
		seen[c] = id
	}
}
