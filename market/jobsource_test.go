package market

import "testing"

func TestSplitJobSource(t *testing.T) {
	for s, want := range map[string][2]string{
		"job:abc/out":             {"abc", "out"},
		"job:abc/out/model.pt":    {"abc", "out/model.pt"},
		"job:abc/out/../out/a":    {"abc", "out/a"},
		"job:abc//out/":           {"abc", "out"},
		"job:abc/../../etc":       {"abc", "etc"},
		"job:abc":                 {},
		"job:abc/":                {},
		"job:/out":                {},
		"abc/out":                 {},
		"bafybeigdyrzt5sfp7udm7h": {},
	} {
		job, sub, ok := SplitJobSource(s)
		if ok != (want[0] != "") || job != want[0] || sub != want[1] {
			t.Errorf("SplitJobSource(%q) = %q %q %t, want %q %q", s, job, sub, ok, want[0], want[1])
		}
	}
}
