package doctor

import (
	"context"
	"errors"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestThisMachine runs every check for real. It must not crash, and every
// check short of ok must say what is wrong; a failure is reported, not
// hidden, but does not fail the test unless E31_REQUIRE_RUNC says this
// machine must be able to run jobs.
func TestThisMachine(t *testing.T) {
	dir := t.TempDir()
	r := Run(context.Background(), Machine{}, Options{DataDir: filepath.Join(dir, "data"), ImageCacheBytes: 1 << 30, Listen: []string{"/ip4/127.0.0.1/tcp/0", "/ip4/127.0.0.1/udp/0/quic-v1"}})
	var text strings.Builder
	_ = r.WriteText(&text)
	t.Logf("this machine:\n%s", text.String())
	if len(r.Checks) != 13 {
		t.Fatalf("%d checks, want 13", len(r.Checks))
	}
	for _, c := range r.Checks {
		if c.Detail == "" {
			t.Errorf("%s: %s without a detail", c.Name, c.Status)
		}
		if c.Status == Fail && c.Fix == "" {
			t.Errorf("%s failed without a fix: %s", c.Name, c.Detail)
		}
	}
	for _, name := range []string{"disk", "listen"} {
		if c := find(t, r, name); c.Status == Fail {
			t.Errorf("%s failed on a temp dir and loopback: %s", name, c.Detail)
		}
	}
	if os.Getenv("E31_REQUIRE_RUNC") != "" && os.Geteuid() == 0 {
		for _, name := range []string{"runtime", "cgroups", "job disks"} {
			if c := find(t, r, name); c.Status == Fail {
				t.Errorf("%s: %s", name, c.Detail)
			}
		}
	}
}

func TestMachineBindFindsATakenPort(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	port := l.Addr().(*net.TCPAddr).Port
	addr := "/ip4/127.0.0.1/tcp/" + itoa(port)
	if err := (Machine{}).Bind(addr); err == nil {
		t.Errorf("bound %s, which is taken", addr)
	}
	if err := (Machine{}).Bind("/dns4/example.com/tcp/1"); err == nil {
		t.Error("bound an address without an IP")
	}
}

func TestMachineDiskWalksUpToWhatExists(t *testing.T) {
	dir := t.TempDir()
	d, err := (Machine{}).Disk(filepath.Join(dir, "not", "yet"))
	if err != nil || d.Mount != dir || d.Free == 0 || d.Size < d.Free {
		t.Errorf("Disk = %+v, %v; want %s measured", d, err, dir)
	}
	f := filepath.Join(dir, "file")
	if err := os.WriteFile(f, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := (Machine{}).Disk(f); err == nil {
		t.Error("a file was taken for a data dir")
	}
}

func TestMachineRunningDaemon(t *testing.T) {
	dir := t.TempDir()
	if got := (Machine{}).RunningDaemon(dir); got != nil {
		t.Errorf("no run file, yet %v", got)
	}
	write := func(pid int) {
		b := `{"peer_id":"x","api":"a","addrs":["/ip4/127.0.0.1/tcp/4031"],"pid":` + itoa(pid) + `}`
		if err := os.WriteFile(filepath.Join(dir, "run.json"), []byte(b), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(os.Getpid())
	if got := (Machine{}).RunningDaemon(dir); len(got) != 1 {
		t.Errorf("live pid: %v", got)
	}
	write(1 << 30) // beyond pid_max: no such process
	if got := (Machine{}).RunningDaemon(dir); got != nil {
		t.Errorf("dead pid: %v", got)
	}
}

func itoa(n int) string { return strconv.Itoa(n) }

// The data dir's mode is read as it is on disk; one not made yet is said
// to be so.
func TestDataDirModeOnDisk(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	if _, err := (Machine{}).DataDirMode(dir); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("a data dir not made: %v, want not there", err)
	}
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if c := checkDataDirMode(Machine{}, Options{DataDir: dir}); c.Status != Warn || !strings.Contains(c.Detail, "0755") {
		t.Fatalf("a 0755 data dir: %+v", c)
	}
	if err := os.Chmod(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if c := checkDataDirMode(Machine{}, Options{DataDir: dir}); c.Status != OK {
		t.Fatalf("a 0700 data dir: %+v", c)
	}
}
