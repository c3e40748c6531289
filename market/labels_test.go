package market

import (
	"strings"
	"testing"
)

func TestLabels(t *testing.T) {
	base := "name: x\nwork: {command: [true]}\nrequest: {gpus: 1, limit: 1h}\noutput: {path: /out}\n"
	d, err := DecodeDeclaration([]byte(base + "labels: {team: vision, sweep/lr: \"3e-4\"}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if d.Labels["team"] != "vision" || d.Labels["sweep/lr"] != "3e-4" {
		t.Fatalf("labels %v", d.Labels)
	}
	for _, c := range []struct{ labels, want string }{
		{"{-team: x}", "labels[\"-team\"]: the key must start with a letter or digit"},
		{"{\"te am\": x}", "may hold only letters"},
		{"{team: [x]}", "labels.team"},
		{"{team: \"" + strings.Repeat("v", MaxLabelValueBytes+1) + "\"}", "at most 253 bytes"},
		{"[team]", "labels"},
	} {
		if _, err := DecodeDeclaration([]byte(base + "labels: " + c.labels + "\n")); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("labels %s: %v, want %q", c.labels, err, c.want)
		}
	}
	if k, v, err := ParseLabel("team=vision=x"); err != nil || k != "team" || v != "vision=x" {
		t.Errorf("ParseLabel(team=vision=x) = %q %q %v", k, v, err)
	}
	if _, _, err := ParseLabel("team"); err == nil || !strings.Contains(err.Error(), "KEY=VALUE") {
		t.Errorf("ParseLabel(team): %v", err)
	}
}
