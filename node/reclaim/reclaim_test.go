package reclaim

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/e31network/e31/exec"
)

// fakeSource returns what the test set, or fails with err.
type fakeSource struct {
	mu  sync.Mutex
	use []exec.GPUUse
	err error
}

func (f *fakeSource) set(use ...exec.GPUUse) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.use, f.err = use, nil
}

func (f *fakeSource) fail(err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.err = err
}

func (f *fakeSource) Use(ctx context.Context) ([]exec.GPUUse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.err != nil {
		return nil, f.err
	}
	return append([]exec.GPUUse(nil), f.use...), nil
}

// fakeProvider records what the watcher asked, and when, in time since
// the bubble's start.
type fakeProvider struct {
	start  time.Time
	mu     sync.Mutex
	events []string
}

func (p *fakeProvider) record(e string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.events = append(p.events, fmt.Sprintf("%s %s", time.Since(p.start), e))
}

func (p *fakeProvider) Reclaim(reason string) { p.record("reclaim: " + reason) }
func (p *fakeProvider) Return()               { p.record("return") }

func (p *fakeProvider) got() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.events...)
}

// leases is a settable Leased.
type leases struct {
	mu   sync.Mutex
	uuid map[string]bool
}

func (l *leases) set(uuids ...string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.uuid = map[string]bool{}
	for _, u := range uuids {
		l.uuid[u] = true
	}
}

func (l *leases) get() map[string]bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.uuid
}

// rig is a watcher running in a synctest bubble with fakes around it.
type rig struct {
	src    *fakeSource
	prov   *fakeProvider
	leases *leases
	logs   *syncBuffer
	stop   func()
}

// syncBuffer is a bytes.Buffer the watcher's goroutine and the test may
// share.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// start runs a watcher with defaults but for what edit changes, its first
// sample taken. Call within a bubble.
func start(t *testing.T, edit func(*Options), use ...exec.GPUUse) *rig {
	t.Helper()
	r := &rig{src: &fakeSource{}, prov: &fakeProvider{start: time.Now()}, leases: &leases{}, logs: &syncBuffer{}}
	r.src.set(use...)
	o := Options{Source: r.src, Provider: r.prov, Leased: r.leases.get,
		Log: slog.New(slog.NewTextHandler(r.logs, nil))}
	if edit != nil {
		edit(&o)
	}
	w, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() {
		w.Run(ctx)
		close(done)
	}()
	r.stop = func() {
		cancel()
		<-done
	}
	t.Cleanup(r.stop)
	synctest.Wait()
	return r
}

// after lets d pass and the watcher act on what it sampled meanwhile.
func after(d time.Duration) {
	time.Sleep(d)
	synctest.Wait()
}

func (r *rig) want(t *testing.T, events ...string) {
	t.Helper()
	got := r.prov.got()
	if strings.Join(got, "\n") != strings.Join(events, "\n") {
		t.Errorf("provider was asked:\n%s\nwant:\n%s\nlog:\n%s", strings.Join(got, "\n"), strings.Join(events, "\n"), r.logs.String())
	}
}

func idle(i int) exec.GPUUse {
	return exec.GPUUse{Index: i, UUID: uuid(i), Utilization: 0}
}

func uuid(i int) string { return fmt.Sprintf("GPU-%d", i) }

func TestReclaimOnForeignProcess(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := start(t, nil, idle(0), idle(1))
		after(time.Minute)
		r.want(t)

		busy := idle(1)
		busy.ForeignPIDs = []int{4242}
		r.src.set(idle(0), busy)
		after(DefaultInterval)
		// Reclaimed once, however long the owner goes on.
		after(time.Hour)
		r.want(t, "1m2s reclaim: owner started using GPU 1 (pid 4242)")
	})
}

// A foreign process counts even on a leased GPU: the owner and a job
// share it, and the job must make way.
func TestReclaimOnForeignProcessOnLeasedGPU(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := start(t, nil)
		r.leases.set(uuid(0))
		busy := idle(0)
		busy.ForeignPIDs = []int{7, 4242}
		busy.Utilization = 100
		r.src.set(busy)
		after(DefaultInterval)
		r.want(t, "2s reclaim: owner started using GPU 0 (pids 7, 4242)")
	})
}

func TestNoReclaimOnLeasedUtilization(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := start(t, nil, idle(0))
		r.leases.set(uuid(0))
		job := idle(0)
		job.Utilization = 100
		r.src.set(job)
		after(time.Hour)
		r.want(t)
	})
}

func TestReclaimOnUnleasedUtilization(t *testing.T) {
	cases := []struct {
		util, threshold int
		reclaim         bool
	}{
		{util: 55, reclaim: true},
		{util: 11, reclaim: true},
		{util: 10},                      // the default threshold itself is not above it
		{util: exec.UtilizationUnknown}, // a GPU that does not say
		{util: 55, threshold: 60},
		{util: 100, threshold: 100}, // 100 turns the rule off
	}
	for _, c := range cases {
		t.Run(fmt.Sprintf("%d%% over %d%%", c.util, c.threshold), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				r := start(t, func(o *Options) { o.Threshold = c.threshold }, idle(0), idle(1))
				r.leases.set(uuid(0))
				busy := idle(1)
				busy.Utilization = c.util
				r.src.set(idle(0), busy)
				after(time.Minute)
				if c.reclaim {
					r.want(t, fmt.Sprintf("2s reclaim: owner started using GPU 1 (%d%% busy with no lease on it)", c.util))
				} else {
					r.want(t)
				}
			})
		})
	}
}

// A job that has just ended leaves its GPU's utilisation up for up to a
// second after its lease let go of the GPU: not the owner.
func TestNoReclaimAtLeaseEnd(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := start(t, nil)
		r.leases.set(uuid(0))
		job := idle(0)
		job.Utilization = 100
		r.src.set(job)
		after(time.Minute)
		r.leases.set() // the lease ended; the sample still shows its job
		after(DefaultInterval)
		r.src.set(idle(0))
		after(time.Hour)
		r.want(t)
	})
}

// At the daemon's start there is no sample before to tell a job that just
// ended from the owner; utilisation alone waits one Interval.
func TestUtilizationAtStartWaitsOneSample(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		busy := idle(0)
		busy.Utilization = 80
		r := start(t, nil, busy)
		r.want(t)
		after(DefaultInterval)
		r.want(t, "2s reclaim: owner started using GPU 0 (80% busy with no lease on it)")
	})
}

func TestReturnAfterIdleFor(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		busy := idle(0)
		busy.ForeignPIDs = []int{4242}
		r := start(t, nil, busy)
		r.want(t, "0s reclaim: owner started using GPU 0 (pid 4242)")

		after(time.Minute) // last owner use seen at 1m
		r.src.set(idle(0))
		after(DefaultIdleFor - DefaultInterval)
		r.want(t, "0s reclaim: owner started using GPU 0 (pid 4242)")
		// 10m after the last sample that showed the owner.
		after(DefaultInterval)
		r.want(t, "0s reclaim: owner started using GPU 0 (pid 4242)", "11m0s return")

		// The owner comes back, briefly: reclaimed again, and the quiet
		// counts from the last sample that showed them.
		r.src.set(busy)
		after(5 * time.Minute)
		r.src.set(idle(0))
		after(5 * time.Minute)
		r.src.set(busy) // back before the quiet was long enough
		after(DefaultInterval)
		r.src.set(idle(0))
		after(DefaultIdleFor)
		r.want(t,
			"0s reclaim: owner started using GPU 0 (pid 4242)",
			"11m0s return",
			"11m2s reclaim: owner started using GPU 0 (pid 4242)",
			"31m2s return")
	})
}

func TestIdleForOption(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		busy := idle(0)
		busy.ForeignPIDs = []int{0}
		r := start(t, func(o *Options) { o.IdleFor = 30 * time.Second; o.Interval = 10 * time.Second }, busy)
		r.src.set(idle(0))
		after(time.Minute)
		r.want(t, "0s reclaim: owner started using GPU 0 (a process outside the job sandboxes)", "30s return")
	})
}

// A node drained by this rule before a restart is returned after IdleFor
// of quiet from the start.
func TestReclaimedAtStart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := start(t, func(o *Options) { o.Reclaimed = true }, idle(0))
		after(DefaultIdleFor - time.Second)
		r.want(t)
		after(time.Second)
		r.want(t, "10m0s return")
	})
}

func TestSourceError(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := start(t, nil, idle(0))
		r.src.fail(errors.New("NVML is gone"))
		after(time.Hour)
		r.want(t)
		if n := strings.Count(r.logs.String(), "NVML is gone"); n != 1 {
			t.Errorf("the same failure logged %d times, want once:\n%s", n, r.logs.String())
		}

		// Reclaimed, then failing: the node stays drained, and the quiet
		// counts again from the last failure.
		busy := idle(0)
		busy.ForeignPIDs = []int{4242}
		r.src.set(busy)
		after(DefaultInterval)
		r.src.set(idle(0))
		after(DefaultInterval)
		r.src.fail(errors.New("NVML is gone"))
		after(time.Hour)
		r.want(t, "1h0m2s reclaim: owner started using GPU 0 (pid 4242)")
		r.src.set(idle(0))
		after(DefaultIdleFor)
		r.want(t, "1h0m2s reclaim: owner started using GPU 0 (pid 4242)", "2h10m4s return")
		if !strings.Contains(r.logs.String(), "GPU use can be read again") {
			t.Errorf("recovery not logged:\n%s", r.logs.String())
		}
	})
}

// The watcher stops with its context, and only then.
func TestRunStops(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := start(t, nil, idle(0))
		after(time.Hour)
		r.stop() // would hang if Run did not return; synctest reports a leak
	})
}

func TestNewRefuses(t *testing.T) {
	src, prov := &fakeSource{}, &fakeProvider{}
	for name, o := range map[string]Options{
		"no source":          {Provider: prov},
		"no provider":        {Source: src},
		"negative interval":  {Source: src, Provider: prov, Interval: -time.Second},
		"negative idle":      {Source: src, Provider: prov, IdleFor: -time.Second},
		"threshold over 100": {Source: src, Provider: prov, Threshold: 101},
		"negative threshold": {Source: src, Provider: prov, Threshold: -1},
	} {
		if _, err := New(o); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	w, err := New(Options{Source: src, Provider: prov})
	if err != nil {
		t.Fatal(err)
	}
	if w.o.Interval != DefaultInterval || w.o.IdleFor != DefaultIdleFor || w.o.Threshold != DefaultThreshold || w.o.Log == nil || w.o.Leased == nil {
		t.Errorf("defaults not filled in: %+v", w.o)
	}
}

// End to end with simulated GPUs marked busy by a file, as e31d
// --sim-gpus --reclaim-on-use runs it.
func TestSimulatedGPUs(t *testing.T) {
	gpus, err := exec.ParseSimSpec("2xH100:80GiB", "peer")
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "sim-gpu-use")
	sim, err := exec.NewSimUse(dir, gpus)
	if err != nil {
		t.Fatal(err)
	}
	synctest.Test(t, func(t *testing.T) {
		r := start(t, func(o *Options) { o.Source = sim })
		// A lease's job shows no process of its own on a simulated GPU,
		// and no utilisation: nothing to reclaim for.
		r.leases.set(gpus[0].UUID)
		after(time.Minute)
		r.want(t)

		if err := os.WriteFile(filepath.Join(dir, "1"), nil, 0o644); err != nil { // touch
			t.Fatal(err)
		}
		after(DefaultInterval)
		r.want(t, "1m2s reclaim: owner started using GPU 1 (a process outside the job sandboxes)")

		if err := os.WriteFile(filepath.Join(dir, "1"), []byte("4242\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		after(time.Minute)
		if err := os.Remove(filepath.Join(dir, "1")); err != nil { // rm
			t.Fatal(err)
		}
		after(DefaultIdleFor - DefaultInterval)
		r.want(t, "1m2s reclaim: owner started using GPU 1 (a process outside the job sandboxes)")
		after(DefaultInterval)
		r.want(t, "1m2s reclaim: owner started using GPU 1 (a process outside the job sandboxes)", "12m2s return")
	})
}
