package market

import (
	"fmt"
	"slices"
	"strings"
	"testing"
)

// starvationRun plays epochs of a cluster kept full by a stream of 1-GPU
// jobs, into which an 8-GPU job from a heavy user is submitted, and reports
// when the big job started (or -1), along with the q and Lmax of the bound
// in doc.go.
type starvationRun struct {
	started   int64 // ms after submission, -1 if never
	q         int   // jobs older than the big one, waiting when it turned starving
	lmax      Duration
	smallWait Duration // longest wait of a small job, to show they were served
}

// With data, the small jobs read a dataset only the first provider holds
// and the big job one only the second holds, each willing to wait
// MaxLocalityWait for its holder: locality must leave the bound standing.
// With nodes ≥ 2 the big job is a gang of that many 8-GPU parts, which
// must find that many providers empty at once.
func simulateStarvation(t *testing.T, o Options, horizon Duration, data bool, nodes int) starvationRun {
	const (
		providers = 4
		perOffer  = 8
		epoch     = Minute
		smallLim  = 32 * Minute // one device frees per minute, cluster-wide
		backlog   = 2           // small jobs kept waiting: enough to take every freed device
	)
	now := scenarioStart
	v := View{Now: now, Usage: []Usage{{Submitter: "heavy", GPUMillis: int64(1_000_000 * Hour)}}}
	for p := range providers {
		o := Offer{Provider: fmt.Sprintf("prov%d", p), CPUs: 64, MemoryBytes: uint64(512 * GiB)}
		for g := range perOffer {
			o.GPUs = append(o.GPUs, GPU{Index: g, UUID: fmt.Sprintf("prov%d/%d", p, g), Model: "H100", MemoryBytes: uint64(80 * GiB)})
		}
		v.Offers = append(v.Offers, o)
	}
	var smallData, bigData []Datum
	if data {
		smallData, bigData = []Datum{{Root: "small-data", Size: uint64(100 * GiB)}}, []Datum{{Root: "big-data", Size: uint64(GiB)}}
		v.Offers[0].Holdings = Holdings{Roots: smallData}
		v.Offers[1].Holdings = Holdings{Roots: bigData}
	}
	wait := Duration(0)
	if data {
		wait = MaxLocalityWait
	}
	// Start full, with one device freeing each minute.
	for i := range providers * perOffer {
		end := now + int64(i+1)*int64(Minute)
		v.Leases = append(v.Leases, Lease{
			ID: fmt.Sprintf("init%d", i), Job: fmt.Sprintf("init%d", i), Provider: fmt.Sprintf("prov%d", i%providers),
			Submitter: "light0", GPUs: []string{fmt.Sprintf("prov%d/%d", i%providers, i/providers)},
			CPUs: 1, MemoryBytes: uint64(GiB), Start: end - int64(smallLim), Limit: smallLim,
		})
	}
	bigAt := now + int64(5*Minute)
	run := starvationRun{started: -1, q: -1}
	small := 0
	submitted := map[string]int64{}
	for ; now < scenarioStart+int64(horizon); now += int64(epoch) {
		v.Now = now
		v.Epoch++
		v.Leases = slices.DeleteFunc(v.Leases, func(l Lease) bool {
			if l.End() > now {
				return false
			}
			setFree(&v, l, true)
			return true
		})
		waitingSmall := 0
		for _, j := range v.Jobs {
			if !isBig(j) {
				waitingSmall++
			}
		}
		for ; waitingSmall < backlog; waitingSmall++ {
			id := fmt.Sprintf("small%d", small)
			v.Jobs = append(v.Jobs, Job{ID: id, Submitter: fmt.Sprintf("light%d", small%3+1), SubmittedAt: now,
				Request: Request{GPUs: 1, CPUs: 1, Memory: GiB, Limit: smallLim, LocalityWait: wait}, Data: smallData})
			submitted[id] = now
			small++
		}
		if now == bigAt {
			big := Job{ID: "big", Submitter: "heavy", SubmittedAt: now,
				Request: Request{GPUs: 8, CPUs: 8, Memory: 64 * GiB, Limit: Hour, LocalityWait: wait}, Data: bigData}
			if nodes < 2 {
				v.Jobs = append(v.Jobs, big)
			}
			for r := range nodes {
				if nodes >= 2 {
					part := big
					part.ID, part.Request.Nodes = TaskID("big", r), nodes
					v.Jobs = append(v.Jobs, part)
				}
			}
		}
		starvingAfter := o.StarvingAfter
		if starvingAfter == 0 {
			starvingAfter = DefaultStarvingAfter
		}
		if run.q < 0 && now >= bigAt && starvingAfter > 0 && now-bigAt >= int64(starvingAfter) {
			run.q = 0
			for _, j := range v.Jobs {
				if j.SubmittedAt < bigAt {
					run.q++
				}
			}
		}
		r := Match(v, o)
		for _, a := range r.Assignments {
			i := slices.IndexFunc(v.Jobs, func(j Job) bool { return j.ID == a.Job })
			j := v.Jobs[i]
			l := Lease{ID: "L-" + j.ID, Job: j.ID, Provider: a.Provider, Submitter: j.Submitter, GPUs: a.GPUs,
				CPUs: j.Request.CPUs, MemoryBytes: uint64(j.Request.Memory), Start: now, Limit: j.Request.Limit}
			setFree(&v, l, false)
			v.Leases = append(v.Leases, l)
			v.Jobs = slices.Delete(v.Jobs, i, i+1)
			if isBig(j) {
				run.started = now - bigAt
			} else {
				run.smallWait = max(run.smallWait, Duration(now-submitted[j.ID]))
				run.lmax = max(run.lmax, j.Request.Limit)
			}
		}
		if run.started >= 0 {
			break
		}
	}
	run.lmax = max(run.lmax, smallLim)
	return run
}

func isBig(j Job) bool { return j.ID == "big" || strings.HasPrefix(j.ID, "big.") }

func setFree(v *View, l Lease, free bool) {
	for oi := range v.Offers {
		if v.Offers[oi].Provider != l.Provider {
			continue
		}
		for gi := range v.Offers[oi].GPUs {
			if slices.Contains(l.GPUs, v.Offers[oi].GPUs[gi].UUID) {
				v.Offers[oi].GPUs[gi].Free = free
			}
		}
	}
}

func TestStarvationBound(t *testing.T) {
	const (
		epoch = Minute
		r, c  = 0, 0 // releases are in the next view; claims settle at once
	)
	for _, tc := range []struct {
		o     Options
		data  bool
		nodes int
	}{
		{Options{}, false, 0},                                            // K = 4, A = 10m
		{Options{Reservations: 1}, false, 0},                             // only the head job reserves
		{Options{Reservations: 1, StarvingAfter: 30 * Minute}, false, 0}, // a later tier
		{Options{}, true, 0},                                             // jobs waiting for their data's holders
		{Options{Reservations: 1}, true, 0},
		{Options{}, false, 2}, // a gang: two providers emptied at once
		{Options{Reservations: 1}, false, 3},
		{Options{Reservations: 1}, true, 4}, // every provider, the gang's data on one
	} {
		o := tc.o
		t.Run(fmt.Sprintf("k=%d,starving=%s,data=%v,nodes=%d", o.Reservations, o.StarvingAfter, tc.data, tc.nodes), func(t *testing.T) {
			run := simulateStarvation(t, o, 12*Hour, tc.data, tc.nodes)
			if run.started < 0 {
				t.Fatal("the 8-GPU job never started")
			}
			a := o.StarvingAfter
			if a == 0 {
				a = DefaultStarvingAfter
			}
			q := max(run.q, 0)
			bound := int64(a) + int64(epoch) + int64(q+1)*int64(run.lmax+r+epoch) + c
			t.Logf("started after %s (bound %s with q=%d, Lmax=%s); small jobs waited at most %s",
				Duration(run.started), Duration(bound), q, run.lmax, run.smallWait)
			if run.started > bound {
				t.Fatalf("started after %s, beyond the bound %s", Duration(run.started), Duration(bound))
			}
			// A gang holds several providers while it waits for the last
			// of them, so the small jobs behind it wait longer than
			// behind one job: the stream is served if none waited a lease
			// longer than that.
			served := a
			if tc.nodes >= 2 {
				served += run.lmax
			}
			if run.smallWait > served {
				t.Fatalf("small jobs waited up to %s: the stream was not served", run.smallWait)
			}
		})
	}
}

// TestStarvationWithoutReservations shows the bound is the mechanism's
// doing: with no reservations and no starving tier, the same stream keeps
// the 8-GPU job waiting for as long as it runs.
func TestStarvationWithoutReservations(t *testing.T) {
	for _, nodes := range []int{0, 2} {
		run := simulateStarvation(t, Options{Reservations: -1, StarvingAfter: -1}, 6*Hour, false, nodes)
		if run.started >= 0 {
			t.Fatalf("the 8-GPU job (nodes=%d) started after %s; the stream should have starved it", nodes, Duration(run.started))
		}
	}
}
