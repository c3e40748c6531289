package cluster_test

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/e31network/e31/testnet/cluster"
)

// Panics finds, in each node's log, Go's report of a panic that ended the
// daemon and the daemon's record of one it recovered, in either log
// format, and nothing in a clean log or a node that never wrote one.
func TestPanicsFoundInLogs(t *testing.T) {
	logs := map[string]string{
		"clean": `time=2025-01-01T00:00:00Z level=INFO msg="e31d ready" peer_id=12D3
time=2025-01-01T00:00:01Z level=WARN msg="publish offer" err="no panic: here"
time=2025-01-01T00:00:02Z level=INFO msg="job log" line="fatal error: in a job's output, quoted"
`,
		"crashed": `time=2025-01-01T00:00:00Z level=INFO msg="e31d ready" peer_id=12D3
panic: runtime error: invalid memory address or nil pointer dereference
[signal SIGSEGV: segmentation violation code=0x1 addr=0x0 pc=0x0]

goroutine 1 [running]:
main.main()
`,
		"recovered": `time=2025-01-01T00:00:00Z level=ERROR msg="panic recovered" where=stream panic=boom proto=/e31/lease/1 stack="goroutine 7 [running]:\n..."
{"time":"2025-01-01T00:00:01Z","level":"ERROR","msg":"panic recovered","where":"gossip-validate","panic":"boom","stack":"..."}
fatal error: concurrent map writes
`,
	}
	dir := t.TempDir()
	var c cluster.Cluster
	for _, name := range []string{"clean", "crashed", "recovered", "unstarted"} {
		data := filepath.Join(dir, name)
		if err := os.MkdirAll(data, 0o700); err != nil {
			t.Fatal(err)
		}
		if log, ok := logs[name]; ok {
			if err := os.WriteFile(filepath.Join(data, "e31d.log"), []byte(log), 0o600); err != nil {
				t.Fatal(err)
			}
		}
		c.Nodes = append(c.Nodes, &cluster.Node{Name: name, Data: data})
	}
	want := []string{
		"crashed: panic: runtime error: invalid memory address or nil pointer dereference",
		`recovered: time=2025-01-01T00:00:00Z level=ERROR msg="panic recovered" where=stream panic=boom proto=/e31/lease/1 stack="goroutine 7 [running]:\n..."`,
		`recovered: {"time":"2025-01-01T00:00:01Z","level":"ERROR","msg":"panic recovered","where":"gossip-validate","panic":"boom","stack":"..."}`,
		"recovered: fatal error: concurrent map writes",
	}
	if got := c.Panics(); !slices.Equal(got, want) {
		t.Errorf("Panics() =\n%q\nwant\n%q", got, want)
	}
	clean := cluster.Cluster{Nodes: c.Nodes[:1]}
	if got := clean.Panics(); len(got) != 0 {
		t.Errorf("Panics() of a clean log = %q, want none", got)
	}
}
