package e2e

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/e31network/e31/ledger"
	"github.com/e31network/e31/market"
	"github.com/e31network/e31/node/api"
	"github.com/e31network/e31/node/diskroom"
	"github.com/e31network/e31/testnet/cluster"
	"github.com/e31network/e31/testnet/poll"
	"golang.org/x/sys/unix"
)

// smallDisk mounts a fresh ext4 filesystem of size bytes, in a loop-backed
// file, at dir, made if missing, and unmounts it when the test ends (after
// whatever ran on it, registered later, has stopped).
func smallDisk(t *testing.T, dir string, size int64) {
	t.Helper()
	for _, tool := range []string{"mkfs.ext4", "mount"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("a small data dir needs %s: %v", tool, err)
		}
	}
	img := filepath.Join(t.TempDir(), "data.img")
	f, err := os.Create(img)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(size); err != nil {
		t.Fatal(err)
	}
	f.Close()
	// No blocks kept for root: what the daemon measures is what there is.
	if out, err := exec.Command("mkfs.ext4", "-q", "-F", "-m", "0", img).CombinedOutput(); err != nil {
		t.Fatalf("mkfs.ext4: %v: %s", err, out)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("mount", "-o", "loop", img, dir).CombinedOutput(); err != nil {
		t.Fatalf("mount: %v: %s", err, out)
	}
	t.Cleanup(func() {
		if err := unix.Unmount(dir, unix.MNT_DETACH); err != nil {
			t.Errorf("unmount the small data dir: %v", err)
		}
	})
}

// freeOn is what an unprivileged writer may still take of dir's
// filesystem.
func freeOn(t *testing.T, dir string) uint64 {
	t.Helper()
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		t.Fatal(err)
	}
	return st.Bavail * uint64(st.Bsize)
}

// fill takes what dir's filesystem has free but leave bytes, in the file
// path, as the machine's owner copying something large would; leave 0
// takes it all, down to the last block.
func fill(t *testing.T, path string, leave uint64) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for free := freeOn(t, filepath.Dir(path)); free > leave; free = freeOn(t, filepath.Dir(path)) {
		st, err := f.Stat()
		if err != nil {
			t.Fatal(err)
		}
		n := free - leave
		err = unix.Fallocate(int(f.Fd()), 0, st.Size(), int64(n))
		if errors.Is(err, unix.ENOSPC) && n > 1<<20 {
			// The filesystem's own metadata takes a little of it:
			// ask for a little less.
			err = unix.Fallocate(int(f.Fd()), 0, st.Size(), int64(n-1<<20))
		}
		if errors.Is(err, unix.ENOSPC) {
			if leave > 0 {
				return
			}
			// The last blocks, one write at a time, until none is
			// left.
			for {
				if _, err := f.Write(make([]byte, 4096)); err != nil {
					return
				}
			}
		}
		if err != nil {
			t.Fatalf("fill %s: %v", path, err)
		}
	}
}

// diskOf is how node i's data dir stands, as e31 id says it.
func diskOf(t *testing.T, c *cluster.Cluster, i int) api.Disk {
	t.Helper()
	id, err := c.Client(i).ID(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if id.Disk == nil {
		t.Fatalf("%s says nothing of its disk", c.Nodes[i].Name)
	}
	return *id.Disk
}

// offerOf is node i's offer as node j sees it.
func offerOf(t *testing.T, c *cluster.Cluster, j, i int) (api.Node, bool) {
	t.Helper()
	nodes, err := c.Client(j).Nodes(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range nodes {
		if n.PeerID == c.Nodes[i].PeerID {
			return n, true
		}
	}
	return api.Node{}, false
}

// TestHostUnderAttackDisk is the disk part of the host under attack: a
// provider whose data dir is a small filesystem of its own (1 GiB, loop
// mounted), and strangers' jobs that try to fill it.
//
// Jobs that together ask for more disk than the filesystem has free are
// not all leased at once: the rest wait, saying that no offer can grant
// their disk now, and at no moment does the filesystem's free space fall
// under the reserve. Each writes random bytes until its own disk is full
// (ENOSPC): each ends failed, its own doing, and its output, kept for
// retention, gives way to the next jobs. The daemon stays up, both ledgers
// verify, and every job's final receipt, naming the disk and the CPUs
// held, is on both sides.
//
// The machine's owner then fills the filesystem past the reserve: the
// provider's offer says its disk is full, and a job waits saying why, until
// the owner's file goes. Last, on a filesystem filled to its last block
// while the provider was stopped (killed with a job's disk mounted), the
// provider comes up: it unmounts the disk, gives up its spare so that its
// stores open, says why it takes no work, and takes work again once
// there is room.
func TestHostUnderAttackDisk(t *testing.T) {
	dir := t.TempDir()
	data := filepath.Join(dir, "node1")
	smallDisk(t, data, 1<<30)
	c := start(t, cluster.Options{
		Dir:            dir,
		N:              2,
		SimGPUsByNode:  []string{"", "4xH100:80GiB"},
		RealDiskByNode: []bool{false, true},
		Heartbeat:      500 * time.Millisecond,
		Args:           []string{"--epoch", "250ms", "--receipt-interval", "1s", "--grace", "1s", "--provider-lost-after", "3s"},
	})
	sub, prov := c.Client(0), c.Client(1)
	ctx := context.Background()

	// What the provider lends: a quarter of the disk kept in reserve, and
	// room for a job of 200 MiB (which may take twice that, with its
	// output) beside the reserve, but not for three.
	d := diskOf(t, c, 1)
	if d.NoDisk != "" || d.Reserve != diskroom.DefaultReserve(d.Size) || d.MaxJobDisk < 200*market.MiB {
		t.Fatalf("the provider's disk at start: %+v", d)
	}
	need := diskroom.NeedOf(200*market.MiB, 0)
	most := int(d.Lendable / need.Total())
	if most < 1 || most > 2 {
		t.Fatalf("room for %d jobs of 200MiB (%+v): the test expects one or two", most, d)
	}

	// (a) and (b): five jobs of 200 MiB each, a GiB in all, each writing
	// until its disk is full. They are the tasks of one array, which every
	// node orders alike: jobs submitted together may enter two nodes'
	// views in different epochs, and where only one fits at a time, the
	// provider and the submitter would each pick another first.
	const jobs = 5
	jd := decl("filler", "head -c 400M /dev/urandom > /out/fill", 1, 3*time.Minute)
	jd.Request.Disk = 200 * market.MiB
	jd.Array = &market.Array{Count: jobs}
	arr := submit(t, sub, jd)
	var ids []string
	for i := range jobs {
		ids = append(ids, market.TaskID(arr.ID, i))
	}
	var mu sync.Mutex
	var sawWait string
	held, underReserve := 0, ""
	watchCtx, stopWatch := context.WithCancel(ctx)
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		for watchCtx.Err() == nil {
			if id, err := prov.ID(watchCtx); err == nil && id.Disk != nil && id.Disk.Free < id.Disk.Reserve {
				mu.Lock()
				underReserve = fmt.Sprintf("%+v", *id.Disk)
				mu.Unlock()
			}
			n := 0
			for _, id := range ids {
				j, err := sub.Job(watchCtx, id)
				if err != nil {
					continue
				}
				switch j.State {
				case api.JobRenting, api.JobRunning, api.JobOutput:
					n++
				case api.JobQueued:
					if strings.Contains(j.Reason, "request.disk 200MiB") {
						mu.Lock()
						sawWait = j.Reason
						mu.Unlock()
					}
				}
			}
			if j, err := sub.Job(watchCtx, arr.ID); err == nil && strings.Contains(j.Reason, "request.disk 200MiB") {
				mu.Lock()
				sawWait = j.Reason
				mu.Unlock()
			}
			mu.Lock()
			held = max(held, n)
			mu.Unlock()
			select {
			case <-watchCtx.Done():
			case <-time.After(100 * time.Millisecond):
			}
		}
	}()
	for _, id := range ids {
		j := waitJob(t, sub, id, 3*time.Minute, "the filler to end", released)
		if j.Outcome != string(ledger.OutcomeFailed) || j.Attribution != string(ledger.AttributionJob) ||
			!strings.Contains(j.Reason, "wrote more than request.disk 200MiB") {
			t.Errorf("filler %s ended %s/%s %q, want failed, the job's doing, for its disk", id, j.Outcome, j.Attribution, j.Reason)
		}
	}
	stopWatch()
	<-watched
	mu.Lock()
	if held > most {
		t.Errorf("%d jobs of 200MiB held at once, where the disk had room for %d", held, most)
	}
	if sawWait == "" {
		t.Error("no waiting job said its disk could not be granted")
	} else {
		t.Logf("a waiting job: %s", sawWait)
	}
	if underReserve != "" {
		t.Errorf("the jobs took the reserve: %s", underReserve)
	}
	mu.Unlock()
	if !c.Nodes[1].Alive() {
		t.Fatal("the provider died")
	}
	for _, id := range ids {
		for side, cl := range map[string]*api.Client{"submitter": sub, "provider": prov} {
			fin := waitFinal(t, cl, id) // and the ledger verifies
			if fin.DiskBytes != 200*market.MiB || fin.CPUs != 1 || fin.MemoryBytes != 256*market.MiB {
				t.Errorf("%s's final receipt of %s holds disk %d, %d CPUs, memory %d", side, id, fin.DiskBytes, fin.CPUs, fin.MemoryBytes)
			}
		}
	}

	// The owner fills the disk past the reserve: no disk to lend, and the
	// offer says so until the file goes.
	filler := filepath.Join(data, "owners-file")
	fill(t, filler, d.Reserve/2)
	poll.Until(t, "the provider's offer to say its disk is full", 30*time.Second, func() bool {
		o, ok := offerOf(t, c, 0, 1)
		return ok && o.NoDisk == market.DiskFull
	})
	if d := diskOf(t, c, 1); d.NoDisk != market.DiskFull || !strings.Contains(d.Why, "under the") {
		t.Fatalf("e31 id on a full disk: %+v", d)
	}
	small := decl("small", "echo hi > /out/hi", 1, time.Minute)
	small.Request.Disk = 16 * market.MiB
	js := submit(t, sub, small)
	waitJob(t, sub, js.ID, 30*time.Second, "the job to say why it waits", func(j api.Job) bool {
		return j.State == api.JobQueued && strings.Contains(j.Reason, "no disk to lend")
	})
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	if j := waitJob(t, sub, js.ID, 60*time.Second, "the job to run once there is room", released); j.Outcome != string(ledger.OutcomeCompleted) {
		t.Fatalf("the job ended %s/%s %q", j.Outcome, j.Attribution, j.Reason)
	}

	// (c): a job runs, its disk mounted, when the provider is killed; the
	// disk is filled to its last block; the provider comes up all the same.
	sleeper := decl("sleeper", "sleep 300", 1, 10*time.Minute)
	sleeper.Request.Disk = 64 * market.MiB
	jsl := submit(t, sub, sleeper)
	waitJob(t, sub, jsl.ID, 60*time.Second, "the sleeper to run", func(j api.Job) bool { return j.State == api.JobRunning })
	if len(mountsUnder(t, filepath.Join(data, "leases"))) == 0 {
		t.Fatal("no disk mounted for the running job")
	}
	if err := c.Kill(1); err != nil {
		t.Fatal(err)
	}
	fill(t, filler, 0)
	if free := freeOn(t, data); free > 64<<10 {
		t.Fatalf("the disk still has %d bytes free", free)
	}
	if err := c.Restart(ctx, 1); err != nil {
		t.Fatalf("the provider did not come up on a full disk: %v", err)
	}
	if m := mountsUnder(t, filepath.Join(data, "leases")); len(m) != 0 {
		t.Fatalf("job disks still mounted after the restart: %v", m)
	}
	if d := diskOf(t, c, 1); d.NoDisk != market.DiskFull {
		t.Fatalf("e31 id after coming up on a full disk: %+v", d)
	}
	log, err := os.ReadFile(filepath.Join(data, "e31d.log"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(log), "no room on the data dir's disk") {
		t.Errorf("the provider's log does not say why it takes no work:\n%s", tail(string(log), 20))
	}
	receipts(t, prov, jsl.ID) // its ledger opens and verifies
	waitJob(t, sub, jsl.ID, 90*time.Second, "the sleeper's lease to end with the provider's restart", released)
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, "the provider to take work again once there is room", 30*time.Second, func() bool {
		o, ok := offerOf(t, c, 0, 1)
		return ok && o.NoDisk == ""
	})
	again := submit(t, sub, small)
	if j := waitJob(t, sub, again.ID, 60*time.Second, "a job after the disk was freed", released); j.Outcome != string(ledger.OutcomeCompleted) {
		t.Fatalf("the job after the disk was freed ended %s/%s %q", j.Outcome, j.Attribution, j.Reason)
	}
	for _, cl := range []*api.Client{sub, prov} {
		receipts(t, cl, again.ID)
	}
}

// tail is the last n lines of s.
func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}
