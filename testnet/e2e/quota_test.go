package e2e

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/e31network/e31/market"
	"github.com/e31network/e31/node/api"
	"github.com/e31network/e31/testnet/cluster"
)

// mountsUnder lists the host's mount points below dir.
func mountsUnder(t *testing.T, dir string) []string {
	t.Helper()
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for line := range strings.SplitSeq(string(b), "\n") {
		if f := strings.Fields(line); len(f) > 4 && strings.HasPrefix(f[4], dir+"/") {
			out = append(out, f[4])
		}
	}
	return out
}

// diskImages lists the job disks' files left under a node's leases.
func diskImages(t *testing.T, data string) []string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(data, "leases", "*", "disk.img"))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// waitNoDisks waits until a node holds no job disk, mounted or not.
func waitNoDisks(t *testing.T, data string, d time.Duration) {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		m, imgs := mountsUnder(t, filepath.Join(data, "leases")), diskImages(t, data)
		if len(m) == 0 && len(imgs) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("job disks left: mounts %v, files %v", m, imgs)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestByzantineDiskQuota: a submitter's job that writes until the disk is
// full is stopped at its request.disk, failed and the job's doing, while a
// neighbour on the same provider completes and the provider's store still
// serves its output; a provider's --max-job-disk keeps larger requests
// away; and a provider killed mid-run leaves no disk behind once it is
// back. The neighbour's final receipt also names the GPU its run saw.
func TestByzantineDiskQuota(t *testing.T) {
	c := start(t, cluster.Options{
		N:             2,
		SimGPUsByNode: []string{"", "2xH100:80GiB"},
		Heartbeat:     500 * time.Millisecond,
		Args:          []string{"--epoch", "250ms", "--receipt-interval", "1s", "--grace", "1s", "--max-job-disk", "1GiB"},
	})
	sub := c.Client(0)
	prov := c.Nodes[1]

	// Above the provider's cap: not matched, and the wait says why.
	big := decl("too-big", "true", 1, time.Minute)
	big.Request.Disk = 2 * market.GiB
	jb := submit(t, sub, big)
	waitJob(t, sub, jb.ID, 30*time.Second, "a reason naming request.disk", func(j api.Job) bool {
		return j.State == api.JobQueued && strings.Contains(j.Reason, "request.disk 2GiB")
	})
	if _, err := sub.Withdraw(context.Background(), jb.ID); err != nil {
		t.Fatal(err)
	}

	hog := decl("hog", "dd if=/dev/zero of=/out/big bs=1M count=200; dd if=/dev/zero of=/tmp/big bs=1M count=200", 1, time.Minute)
	hog.Request.Disk = 64 * market.MiB
	neighbour := decl("neighbour", "dd if=/dev/zero of=/out/small bs=1M count=16 && sleep 2 && echo ok", 1, time.Minute)
	neighbour.Request.Disk = 64 * market.MiB
	jh, jn := submit(t, sub, hog), submit(t, sub, neighbour)
	jh = waitJob(t, sub, jh.ID, 90*time.Second, "the hog to end", released)
	jn = waitJob(t, sub, jn.ID, 90*time.Second, "the neighbour to end", released)
	if jh.Outcome != "failed" || jh.Attribution != "job" || !strings.Contains(jh.Reason, "wrote more than request.disk 64MiB") {
		t.Fatalf("hog ended %s/%s %q, want failed/job naming request.disk 64MiB", jh.Outcome, jh.Attribution, jh.Reason)
	}
	if jn.Outcome != "completed" {
		t.Fatalf("neighbour ended %s/%s %q", jn.Outcome, jn.Attribution, jn.Reason)
	}
	out := filepath.Join(t.TempDir(), "n")
	if _, err := sub.Get(context.Background(), jn.ID, api.GetRequest{Dir: out}); err != nil {
		t.Fatal(err)
	}
	if st, err := os.Stat(filepath.Join(out, "out", "small")); err != nil || st.Size() != 16<<20 {
		t.Fatalf("neighbour's output: %v %v", st, err)
	}
	fin := waitFinal(t, sub, jn.ID)
	if len(fin.GPUsSeen) != 1 || len(jn.GPUs) != 1 || fin.GPUsSeen[0].UUID != jn.GPUs[0] || fin.GPUsSeen[0].Model != "H100" || jn.GPUMismatch != "" {
		t.Fatalf("neighbour leased %v, its receipt saw %+v, status mismatch %q", jn.GPUs, fin.GPUsSeen, jn.GPUMismatch)
	}
	// The hog's output comes back too, cut at its quota, with its logs.
	hout := filepath.Join(t.TempDir(), "h")
	if _, err := sub.Get(context.Background(), jh.ID, api.GetRequest{Dir: hout}); err != nil {
		t.Fatal(err)
	}
	if st, err := os.Stat(filepath.Join(hout, "out", "big")); err != nil || st.Size() > 64<<20 {
		t.Fatalf("hog's output: %v %v", st, err)
	}
	if b, _ := os.ReadFile(filepath.Join(hout, "stderr.log")); !strings.Contains(string(b), "No space left on device") {
		t.Fatalf("hog's stderr: %q", b)
	}
	waitNoDisks(t, prov.Data, 30*time.Second)

	// A crash mid-run: the disk stays mounted while the daemon is gone,
	// and its restart removes it.
	sleeper := decl("sleeper", "sleep 120", 1, 5*time.Minute)
	sleeper.Request.Disk = 64 * market.MiB
	js := submit(t, sub, sleeper)
	waitJob(t, sub, js.ID, 60*time.Second, "the sleeper to run", func(j api.Job) bool { return j.State == api.JobRunning })
	if len(mountsUnder(t, filepath.Join(prov.Data, "leases"))) == 0 {
		t.Fatal("no disk mounted for a running job")
	}
	if err := c.Kill(1); err != nil {
		t.Fatal(err)
	}
	if err := c.Restart(context.Background(), 1); err != nil {
		t.Fatal(err)
	}
	waitNoDisks(t, prov.Data, 60*time.Second)
	waitJob(t, sub, js.ID, 90*time.Second, "the sleeper to end", released)
}
