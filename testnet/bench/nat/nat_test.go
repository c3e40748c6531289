package nat

import (
	"flag"
	"os"
	"strings"
	"testing"
	"time"
)

// A row without a relayed offer or a staging figure shows a dash there;
// notes follow the table.
func TestReportText(t *testing.T) {
	r := Report{Size: 4 << 20, LoadEnd: "0.40 1.06 2.94", Rows: []Row{
		{Name: "hole-punched", ToLease: 900 * time.Millisecond, ToRelayed: 18200 * time.Millisecond, Path: "direct", StagingMiBs: 42, Staging: 95 * time.Millisecond},
		{Name: "relayed (filtering router)", ToLease: 900 * time.Millisecond, ToRelayed: 18200 * time.Millisecond, Path: "relayed", Note: "the first job is still running"},
		{Name: "loopback, no NAT", ToLease: 3 * time.Second, Path: "direct", StagingMiBs: 43, Staging: 93 * time.Millisecond},
	}}
	var b strings.Builder
	if err := r.WriteText(&b); err != nil {
		t.Fatal(err)
	}
	golden(t, "testdata/report.txt", b.String())
}

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

// golden compares got with the file at path, or with -update rewrites it.
func golden(t *testing.T, path, got string) {
	t.Helper()
	if *update {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if got != string(want) {
		t.Errorf("got\n%s\nwant (%s; go test -update rewrites it)\n%s", got, path, want)
	}
}
