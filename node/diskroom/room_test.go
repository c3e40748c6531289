package diskroom

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/e31network/e31/exec"
	"github.com/e31network/e31/market"
)

const (
	mib = uint64(market.MiB)
	gib = uint64(market.GiB)
)

// disk is a filesystem of a given size whose free space a test sets.
type disk struct {
	size uint64
	free atomic.Uint64
}

func (d *disk) statfs(string) (uint64, uint64, error) { return d.size, d.free.Load(), nil }

// openOn opens a room on d in a fresh folder.
func openOn(t *testing.T, d *disk, o Options) *Room {
	t.Helper()
	o.Dir = t.TempDir()
	r, err := open(o, d.statfs)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// The default reserve is a tenth of the disk and at least 20 GiB, but at
// most a quarter of it; the default cap on a job's disk is a quarter.
func TestDefaults(t *testing.T) {
	for _, tc := range []struct{ size, reserve, maxJob uint64 }{
		{1 * gib, 256 * mib, 256 * mib},
		{64 * gib, 16 * gib, 16 * gib},
		{100 * gib, 20 * gib, 25 * gib},
		{200 * gib, 20 * gib, 50 * gib},
		{1 << 40, (1 << 40) / 10, 256 * gib},
		{8 * mib, 2 * mib, uint64(market.MinDisk)},
	} {
		if got := DefaultReserve(tc.size); got != tc.reserve {
			t.Errorf("reserve of %s: %s, want %s", size(tc.size), size(got), size(tc.reserve))
		}
		if got, want := RecordsReserve(tc.size), min(max(tc.size/100, gib), tc.reserve); got != want {
			t.Errorf("reserve of a node that runs no jobs on %s: %s, want %s", size(tc.size), size(got), size(want))
		}
		if got := DefaultMaxJobDisk(tc.size); got != tc.maxJob {
			t.Errorf("max job disk of %s: %s, want %s", size(tc.size), size(got), size(tc.maxJob))
		}
	}
}

// A job's disk is granted only while what every granted job may take
// stays under the free space less the reserve; what a grant holds comes
// back when it is dropped, and a signed lease's disk counts what its image
// has not yet taken.
func TestHoldCountsEveryGrant(t *testing.T) {
	d := &disk{size: 100 * gib}
	d.free.Store(60 * gib)
	r := openOn(t, d, Options{Reserve: 10 * gib})
	need := NeedOf(10*gib, 1*gib) // about 22.7 GiB
	if err := r.Hold("j1", need); err != nil {
		t.Fatal(err)
	}
	if err := r.Hold("j2", need); err != nil {
		t.Fatal(err)
	}
	// 50 GiB to lend, 45.3 promised: a third does not fit.
	err := r.Hold("j3", need)
	if !errors.Is(err, ErrNoRoom) {
		t.Fatalf("a third job: %v, want ErrNoRoom", err)
	}
	t.Log(err)
	r.Drop("j2")
	if err := r.Hold("j3", need); err != nil {
		t.Fatalf("after a proposal came to nothing: %v", err)
	}

	// j1 is signed; its disk's image has taken some blocks, which the
	// free space no longer holds: what j1 may still take shrinks as much.
	img := filepath.Join(t.TempDir(), "disk.img")
	if err := os.WriteFile(img, make([]byte, 4<<20), 0o600); err != nil {
		t.Fatal(err)
	}
	r.Signed("j1", "lease-1", img)
	alloc := allocatedOf([]string{img})[img]
	if alloc < 4<<20 {
		t.Fatalf("the image takes %d bytes", alloc)
	}
	st := r.Refresh()
	want := satSub(exec.DiskCost(10*gib), alloc) + need.Output + need.Inputs + need.Total()
	if st.Promised != want {
		t.Fatalf("promised %s, want %s (image holds %s)", size(st.Promised), size(want), size(alloc))
	}
	r.Staged("lease-1")
	r.Imported("lease-1")
	if st := r.Refresh(); st.Promised != satSub(exec.DiskCost(10*gib), alloc)+need.Total() {
		t.Fatalf("after staging and import: promised %s", size(st.Promised))
	}
	r.Release("lease-1")
	r.Drop("j3")
	if st := r.Refresh(); st.Promised != 0 || st.Jobs != 0 {
		t.Fatalf("all released: %+v", st)
	}
	if err := r.Hold("big", NeedOf(26*gib, 0)); !errors.Is(err, ErrNoRoom) {
		t.Fatalf("a disk above the cap (25 GiB of 100): %v", err)
	}
}

// Two proposals racing for the last free room: one is granted, never
// both, however they interleave.
func TestHoldRacesTakeTurns(t *testing.T) {
	d := &disk{size: 100 * gib}
	d.free.Store(60 * gib)
	r := openOn(t, d, Options{Reserve: 10 * gib})
	need := NeedOf(10*gib, 0)
	fit := int((50 * gib) / need.Total())
	var wg sync.WaitGroup
	var granted atomic.Int32
	for i := range 16 {
		wg.Go(func() {
			if r.Hold(fmt.Sprint("j", i), need) == nil {
				granted.Add(1)
			}
		})
	}
	wg.Wait()
	if int(granted.Load()) != fit {
		t.Fatalf("%d of 16 granted, want %d", granted.Load(), fit)
	}
}

// The offer says the largest disk the node can grant beside its signed
// leases, rounded down to three significant bits and within the cap;
// that it lends none once the free space is under the reserve, or too
// little is left; and Changed is told each time that changes.
func TestOffered(t *testing.T) {
	d := &disk{size: 100 * gib}
	d.free.Store(90 * gib)
	var changed atomic.Int32
	r := openOn(t, d, Options{Reserve: 10 * gib, Changed: func() { changed.Add(1) }})
	if q, why := r.Offered(); q != 25*gib || why != "" {
		t.Fatalf("a roomy disk: %s %q, want the 25 GiB cap", size(q), why)
	}
	// 30 GiB to lend: a disk of about 14.5 GiB fits, offered as 14.
	d.free.Store(40 * gib)
	r.Refresh()
	if q, why := r.Offered(); q != 14*gib || why != "" {
		t.Fatalf("30 GiB to lend: %s %q, want 14GiB", size(q), why)
	}
	if NeedOf(14*gib, 0).Total() > 30*gib || NeedOf(16*gib, 0).Total() <= 30*gib {
		t.Fatal("14GiB is not the largest of the series that fits")
	}
	// A proposal in flight does not change the offer; its signed lease
	// does.
	if err := r.Hold("j1", NeedOf(8*gib, 0)); err != nil {
		t.Fatal(err)
	}
	if r.Refresh(); changed.Load() != 1 {
		t.Fatalf("a proposal changed the offer: told %d times", changed.Load())
	}
	r.Signed("j1", "lease-1", "")
	if q, _ := r.Offered(); q != 6*gib {
		t.Fatalf("beside an 8 GiB lease: %s, want 6GiB", size(q))
	}
	// Under the reserve: no disk to lend.
	d.free.Store(9 * gib)
	r.Refresh()
	if q, why := r.Offered(); q != 0 || why != market.DiskFull {
		t.Fatalf("under the reserve: %s %q", size(q), why)
	}
	st := r.Status()
	t.Log(st.Why)
	// Room again.
	d.free.Store(90 * gib)
	r.Refresh()
	if _, why := r.Offered(); why != "" {
		t.Fatalf("room again: %q", why)
	}
	if changed.Load() != 4 {
		t.Fatalf("told %d times of 4 changes", changed.Load())
	}
}

// Where a job's disk cannot be bounded, the node lends none unless its
// owner says otherwise.
func TestNoQuotasFailClosed(t *testing.T) {
	d := &disk{size: 100 * gib}
	d.free.Store(90 * gib)
	noLoop := errors.New("no /dev/loop-control")
	r := openOn(t, d, Options{NoQuotas: noLoop})
	if q, why := r.Offered(); q != 0 || why != market.DiskUnbounded {
		t.Fatalf("no quotas: %s %q", size(q), why)
	}
	if err := r.Hold("j1", NeedOf(gib, 0)); !errors.Is(err, ErrNoRoom) {
		t.Fatalf("a job without quotas: %v", err)
	}
	r = openOn(t, d, Options{NoQuotas: noLoop, Unbounded: true})
	if _, why := r.Offered(); why != "" {
		t.Fatalf("unbounded by the owner's word: %q", why)
	}
	if err := r.Hold("j1", NeedOf(gib, 0)); err != nil {
		t.Fatal(err)
	}
}

// The content store writes only while the free space after it covers the
// reserve and what the jobs' disks may still take.
func TestContentRoom(t *testing.T) {
	d := &disk{size: 100 * gib}
	d.free.Store(40 * gib)
	r := openOn(t, d, Options{Reserve: 10 * gib})
	if err := r.ContentRoom(int64(29 * gib)); err != nil {
		t.Fatal(err)
	}
	if err := r.Hold("j1", NeedOf(10*gib, 0)); err != nil {
		t.Fatal(err)
	}
	// The job's disk may take about 10.7 GiB; its output's import is the
	// content store's own.
	if err := r.ContentRoom(int64(19 * gib)); err != nil {
		t.Fatalf("beside one job's disk: %v", err)
	}
	if err := r.ContentRoom(int64(20 * gib)); !errors.Is(err, ErrNoRoom) {
		t.Fatalf("into the room promised to the job's disk: %v", err)
	}
}

// On a disk with less free than the spare, Start gives the spare up; Watch
// makes it again once the disk has room.
func TestSpare(t *testing.T) {
	d := &disk{size: 100 * gib}
	d.free.Store(90 * gib)
	r := openOn(t, d, Options{})
	r.makeSpare()
	st, err := os.Stat(r.spare)
	if err != nil || uint64(st.Size()) != r.spareLen {
		t.Fatalf("spare: %v %v", st, err)
	}
	d.free.Store(1 * mib)
	if s := r.Start(); s.NoDisk != market.DiskFull {
		t.Fatalf("full at start: %+v", s)
	}
	if _, err := os.Stat(r.spare); !os.IsNotExist(err) {
		t.Fatalf("spare kept on a full disk: %v", err)
	}
}

// BenchmarkContentRoom is what the content store pays before each batch
// it writes (16 MiB): a statfs and a stat of each granted disk's image.
func BenchmarkContentRoom(b *testing.B) {
	dir := b.TempDir()
	r, err := Open(Options{Dir: dir, Reserve: 1})
	if err != nil {
		b.Fatal(err)
	}
	for i := range 8 {
		img := filepath.Join(dir, fmt.Sprint("disk", i, ".img"))
		if err := os.WriteFile(img, make([]byte, 4096), 0o600); err != nil {
			b.Fatal(err)
		}
		if err := r.Hold(fmt.Sprint("j", i), NeedOf(market.MinDisk, 0)); err != nil {
			b.Skipf("no room here for 8 small grants: %v", err)
		}
		r.Signed(fmt.Sprint("j", i), fmt.Sprint("l", i), img)
	}
	b.ResetTimer()
	for b.Loop() {
		if err := r.ContentRoom(16 << 20); err != nil {
			b.Fatal(err)
		}
	}
}
