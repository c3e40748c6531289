package view

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/e31network/e31/market"
	"github.com/e31network/e31/node/wire"
	"github.com/e31network/e31/node/wire/wiretest"
	"pgregory.net/rapid"
)

// arrayOnWire declares an array of n tasks, at most parallel leased at
// once, as sub, and returns the signed declaration and its job.
func arrayOnWire(t *testing.T, sub wiretest.Party, n, parallel int, now time.Time) (raw []byte, j *OpenJob) {
	t.Helper()
	b := wiretest.Declaration(t)
	b.Declaration.Array = &market.Array{Count: n, Parallel: parallel}
	s := wiretest.OnWire(t, sub, wire.KindDeclaration, b)
	if err := wire.ValidateJobMessage(s); err != nil {
		t.Fatal(err)
	}
	return s.Raw, &OpenJob{ID: wire.JobID(s), Submitter: sub.ID, Body: b, Seen: now, Signed: now, Hash: s.Hash()}
}

func openIDs(mv market.View) []string {
	var ids []string
	for _, j := range mv.Jobs {
		ids = append(ids, j.ID)
	}
	slices.Sort(ids)
	return ids
}

// An array's one declaration is a job for each task in the view; its cap
// leaves open only its lowest tasks that the live leases leave room for;
// a re-announcement is known; a withdrawal of the array closes them all.
func TestArrayIsATaskEach(t *testing.T) {
	sub, prov := wiretest.FreshParty(t), wiretest.FreshParty(t)
	v := NewMarket()
	now := time.Now()
	raw, aj := arrayOnWire(t, sub, 5, 2, now)
	if !v.AddJob(aj) || v.OpenCount() != 5 {
		t.Fatalf("array of 5 added: %d open", v.OpenCount())
	}
	task, ok := v.Job(market.TaskID(aj.ID, 3))
	if !ok {
		t.Fatal("task 3 not in the view")
	}
	if env := task.Declaration().Work.Env; env[market.EnvTaskIndex] != "3" || env[market.EnvTaskCount] != "5" || env["SEED"] != "1" {
		t.Fatalf("task 3 runs with %v", env)
	}
	if task.Declaration().Array != nil {
		t.Fatal("a task's declaration is an array")
	}
	if _, ok := v.Job(aj.ID); ok {
		t.Fatal("the array itself is open as a job")
	}
	at := now.Add(time.Second)
	roomy := fourGPUs(now)
	mv := v.Snapshot(1, at, at, roomy)
	if got, want := openIDs(mv), []string{market.TaskID(aj.ID, 0), market.TaskID(aj.ID, 1)}; !slices.Equal(got, want) {
		t.Fatalf("open with a cap of 2: %v, want %v", got, want)
	}

	l := wiretest.SignedLease(t, prov, sub)
	l.Terms.Job = market.TaskID(aj.ID, 0)
	v.AddLease(l, Local(now))
	mv = v.Snapshot(2, at, at, roomy)
	if got, want := openIDs(mv), []string{market.TaskID(aj.ID, 1)}; !slices.Equal(got, want) {
		t.Fatalf("open with task 0 leased: %v, want %v", got, want)
	}

	if known, _ := v.Reannounced(raw, sub.ID, at); !known {
		t.Fatal("the array's re-announcement is not known")
	}
	if s, ok := v.SubmitterOf(aj.ID); !ok || s != sub.ID {
		t.Fatalf("SubmitterOf(array) = %v, %v", s, ok)
	}
	if err := NewJobChecks(v).Validate(wiretest.OnWire(t, sub, wire.KindWithdrawal, wire.WithdrawalBody{Job: aj.ID})); err != nil {
		t.Fatalf("the array's withdrawal by its submitter: %v", err)
	}
	v.CloseJob(aj.ID, sub.ID, Local(at))
	if n := v.OpenCount(); n != 0 {
		t.Fatalf("%d tasks open after the array's withdrawal", n)
	}

	// Pruned once closed long enough: the entry goes with its tasks.
	v.Prune(at.Add(time.Hour), time.Minute, time.Hour)
	if len(v.arrays) != 0 {
		t.Fatalf("%d arrays left after every task was pruned", len(v.arrays))
	}
}

// A withdrawal that overtakes its array's declaration closes every task.
func TestArrayWithdrawnBeforeDeclared(t *testing.T) {
	sub := wiretest.FreshParty(t)
	v := NewMarket()
	now := time.Now()
	_, aj := arrayOnWire(t, sub, 3, 0, now)
	v.CloseJob(aj.ID, sub.ID, Local(now))
	if v.AddJob(aj) || v.OpenCount() != 0 {
		t.Fatalf("array withdrawn before it was declared: %d open", v.OpenCount())
	}
}

// A submitter's open tasks are bounded: an array over the bound adds none.
func TestArrayOverTheBoundAddsNone(t *testing.T) {
	sub := wiretest.FreshParty(t)
	v := NewBoundedMarket(Bounds{Jobs: -1}) // the submitter's own bound alone
	now := time.Now()
	_, a := arrayOnWire(t, sub, market.MaxArrayTasks, 0, now)
	if !v.AddJob(a) {
		t.Fatal("a full-sized array refused")
	}
	_, b := arrayOnWire(t, sub, 2, 0, now.Add(time.Millisecond))
	if v.AddJob(b) || v.OpenCount() != market.MaxArrayTasks {
		t.Fatalf("a second array over the bound: %d open", v.OpenCount())
	}
}

// A gang's one declaration is a job for each part in the view, each part
// running with its rank; the parts are open together, and the gang
// itself is no job.
func TestGangIsAPartEach(t *testing.T) {
	sub := wiretest.FreshParty(t)
	v := NewMarket()
	now := time.Now()
	b := wiretest.Declaration(t)
	b.Declaration.Request.Nodes = 3
	s := wiretest.OnWire(t, sub, wire.KindDeclaration, b)
	if err := wire.ValidateJobMessage(s); err != nil {
		t.Fatal(err)
	}
	g := &OpenJob{ID: wire.JobID(s), Submitter: sub.ID, Body: b, Seen: now, Signed: now, Hash: s.Hash()}
	if !v.AddJob(g) || v.OpenCount() != 3 {
		t.Fatalf("gang of 3 added: %d open", v.OpenCount())
	}
	if _, ok := v.Job(g.ID); ok {
		t.Fatal("the gang itself is open as a job")
	}
	part, ok := v.Job(market.TaskID(g.ID, 2))
	if !ok {
		t.Fatal("part 2 not in the view")
	}
	if env := part.Declaration().Work.Env; env[market.EnvNodeRank] != "2" || env[market.EnvNumNodes] != "3" || env[market.EnvRank] != "2" || env[market.EnvWorldSize] != "3" {
		t.Fatalf("part 2 runs with %v", env)
	}
	at := now.Add(time.Second)
	mv := v.Snapshot(1, at, at, nil)
	if got := openIDs(mv); len(got) != 3 {
		t.Fatalf("open parts %v, want all 3", got)
	}
	for _, j := range mv.Jobs {
		if j.Request.Nodes != 3 {
			t.Fatalf("part %s carries nodes=%d to Match, want 3", j.ID, j.Request.Nodes)
		}
	}
}

// fourGPUs is one offer of four GPUs, room for more tasks than a test's
// caps leave.
func fourGPUs(now time.Time) []SignedOffer {
	o := market.Offer{Provider: "p1", CPUs: 16, MemoryBytes: 64 << 30}
	for i := range 4 {
		o.GPUs = append(o.GPUs, market.GPU{Index: i, UUID: fmt.Sprintf("GPU-%d", i), Model: "H100", MemoryBytes: 80 << 30, Free: true})
	}
	return []SignedOffer{{Offer: o, SignedAt: now.UnixMilli()}}
}

// An array's tasks beyond what the view's offers could hold at once are
// left out of a pass, its lowest indices kept; a gang's parts all stay.
func TestArrayCappedAtTheOffersCapacity(t *testing.T) {
	sub := wiretest.FreshParty(t)
	v := NewMarket()
	now := time.Now()
	_, aj := arrayOnWire(t, sub, 100, 0, now)
	v.AddJob(aj)
	at := now.Add(time.Second)
	mv := v.Snapshot(1, at, at, fourGPUs(now))
	var want []string
	for i := range 4 / aj.Body.Declaration.Request.GPUs {
		want = append(want, market.TaskID(aj.ID, i))
	}
	if got := openIDs(mv); !slices.Equal(got, want) {
		t.Fatalf("100 tasks of %d GPUs on 4 GPUs: %v, want the %d lowest", aj.Body.Declaration.Request.GPUs, got, len(want))
	}
	if mv = v.Snapshot(2, at, at, nil); len(mv.Jobs) != 1 {
		t.Fatalf("no offers: %d tasks, want 1, to hear why it waits", len(mv.Jobs))
	}

	b := wiretest.Declaration(t)
	b.Declaration.Request.Nodes = 6
	s := wiretest.OnWire(t, sub, wire.KindDeclaration, b)
	g := &OpenJob{ID: wire.JobID(s), Submitter: sub.ID, Body: b, Seen: now, Signed: now, Hash: s.Hash()}
	v.AddJob(g)
	n := 0
	for _, j := range v.Snapshot(3, at, at, fourGPUs(now)).Jobs {
		if a, _, ok := market.SplitTaskID(j.ID); ok && a == g.ID {
			n++
		}
	}
	if n != 6 {
		t.Fatalf("a gang of 6 on 4 GPUs: %d parts in the view, want all 6", n)
	}
}

// The heap keeps exactly the room smallest of distinct indices, whatever
// the order they come in.
func TestMaxHeapKeepsTheSmallest(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		idx := rapid.SliceOfNDistinct(rapid.IntRange(0, 500), 0, 200, rapid.ID[int]).Draw(t, "indices")
		room := rapid.IntRange(0, 50).Draw(t, "room")
		h := &maxHeap{room: room}
		for _, i := range idx {
			h.offer(i)
		}
		sorted := slices.Sorted(slices.Values(idx))
		for r, i := range sorted {
			if want := r < room; h.keeps(i) != want {
				t.Fatalf("index %d, the %dth smallest, kept %v with room %d", i, r, !want, room)
			}
		}
	})
}

// A provider's proposal for a task that raced the task's lease is refused
// and the task declined here; the lease's announcement then closes it for
// good, and the array's re-announcements do not open it again. A lease
// its submitter requeues does open it again, in whichever order the
// release and the lease's announcement arrive.
func TestDeclinedTaskClosedByItsLease(t *testing.T) {
	sub, prov := wiretest.FreshParty(t), wiretest.FreshParty(t)
	now := time.Now()
	raw, aj := arrayOnWire(t, sub, 3, 0, now)
	isOpen := func(v *Market, id string) bool {
		_, ok := v.Job(id)
		return ok
	}
	lease := func(task int) wire.SignedLease {
		l := wiretest.SignedLease(t, prov, sub)
		l.Terms.Job = market.TaskID(aj.ID, task)
		l.Terms.ID = fmt.Sprintf("lease-%d", task)
		return l
	}
	requeue := func(l wire.SignedLease, at time.Time) wire.ReleaseBody {
		return wire.ReleaseBody{Lease: l.Terms.ID, Job: l.Terms.Job, Provider: l.Terms.Provider, Submitter: l.Terms.Submitter,
			At: at.UnixMilli(), Requeued: true}
	}

	v := NewMarket()
	v.AddJob(aj)
	t0, t1, t2 := market.TaskID(aj.ID, 0), market.TaskID(aj.ID, 1), market.TaskID(aj.ID, 2)
	for i, id := range []string{t0, t1, t2} {
		v.Decline(id, sub.ID, now.Add(time.Second))
		if isOpen(v, id) {
			t.Fatalf("task %d open after its proposal was refused", i)
		}
	}
	// Task 0: leased, and that is all.
	v.AddLease(lease(0), Local(now.Add(2*time.Second)))
	// Task 1: leased, then the lease requeued.
	l1 := lease(1)
	v.AddLease(l1, Local(now.Add(2*time.Second)))
	v.ReleaseLease(requeue(l1, now.Add(3*time.Second)), sub.ID, Local(now.Add(3*time.Second)))
	// Task 2: the requeue overtakes the lease's announcement.
	l2 := lease(2)
	v.ReleaseLease(requeue(l2, now.Add(3*time.Second)), sub.ID, Local(now.Add(3*time.Second)))
	v.AddLease(l2, Local(now.Add(4*time.Second)))

	for k := range 3 {
		at := now.Add(time.Duration(5+k) * time.Second)
		if known, _ := v.Reannounced(raw, sub.ID, at); !known {
			t.Fatal("the array's re-announcement is not known")
		}
		if isOpen(v, t0) {
			t.Fatalf("a leased task opened again by the array's re-announcement %d", k+1)
		}
		if !isOpen(v, t1) || !isOpen(v, t2) {
			t.Fatalf("requeued tasks open after re-announcement %d: %v, %v", k+1, isOpen(v, t1), isOpen(v, t2))
		}
	}
}
