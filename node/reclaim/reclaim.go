package reclaim

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/e31network/e31/exec"
	"github.com/e31network/e31/node/task"
)

// Source samples what uses the machine's GPUs: one exec.GPUUse per GPU.
// exec/nvidia's UseReader and exec.SimUse are sources.
type Source interface {
	Use(ctx context.Context) ([]exec.GPUUse, error)
}

// Provider is the node's side of a reclaim: its drain. Both are called
// from Run's goroutine, never concurrently, and should not block long: the
// next sample waits for them.
type Provider interface {
	// Reclaim drains the node quickly, as the watcher's own drain, with
	// reason in the log and the drain's status.
	Reclaim(reason string)
	// Return lifts the watcher's own drain. A drain the owner set (e31
	// drain) is not the watcher's and stays; with no drain of the
	// watcher's left, Return does nothing.
	Return()
}

// Defaults for the zero values of Options.
const (
	DefaultInterval  = 2 * time.Second
	DefaultIdleFor   = 10 * time.Minute
	DefaultThreshold = 10
)

// Options configure New.
type Options struct {
	// Source samples the GPUs. Required.
	Source Source
	// Provider drains the node and lifts that drain. Required.
	Provider Provider
	// Leased returns the UUIDs of the GPUs that leases hold now, whose
	// utilisation is their jobs'. The watcher keeps the map until the
	// next sample, so it must be a fresh one, not the provider's own.
	// Nil: no GPU is leased.
	Leased func() map[string]bool
	// Interval is the time between samples. Default DefaultInterval (2s):
	// the owner waits at most that long before the node starts to make way,
	// and an NVML sample costs well under a millisecond.
	Interval time.Duration
	// IdleFor is how long no sample must have shown the owner's use before
	// the node is returned. Default DefaultIdleFor (10 minutes): an owner
	// between two runs of their own should not see the node take a job
	// and give it back again.
	IdleFor time.Duration
	// Threshold is the utilisation, in percent, above which a GPU that no
	// lease holds is in the owner's use. Default DefaultThreshold (10):
	// above the blips of a display or a driver's housekeeping. 100 turns
	// the utilisation rule off, leaving the processes alone to decide.
	Threshold int
	// Reclaimed says that the node is already drained by this rule (a
	// reclaim saved before a restart of the daemon): Run then returns it
	// once IdleFor has passed without owner use, counted from Run's start.
	Reclaimed bool
	// Log receives the watcher's decisions and the source's failures.
	// Default: discarded.
	Log *slog.Logger
}

// Watcher watches the GPUs and reclaims the node for its owner. Its
// options are immutable after New; everything Run decides is local to
// Run's goroutine, so the watcher holds no lock. Run it once.
type Watcher struct {
	o Options
}

// New checks o and fills in its defaults.
func New(o Options) (*Watcher, error) {
	if o.Source == nil {
		return nil, errors.New("reclaim: no source of GPU use")
	}
	if o.Provider == nil {
		return nil, errors.New("reclaim: no provider to drain")
	}
	if o.Interval < 0 || o.IdleFor < 0 || o.Threshold < 0 || o.Threshold > 100 {
		return nil, fmt.Errorf("reclaim: interval %s, idle-for %s, threshold %d%%: want durations ≥ 0 and a threshold in 0..100",
			o.Interval, o.IdleFor, o.Threshold)
	}
	if o.Leased == nil {
		o.Leased = func() map[string]bool { return nil }
	}
	if o.Interval == 0 {
		o.Interval = DefaultInterval
	}
	if o.IdleFor == 0 {
		o.IdleFor = DefaultIdleFor
	}
	if o.Threshold == 0 {
		o.Threshold = DefaultThreshold
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	return &Watcher{o: o}, nil
}

// Run samples the GPUs every Interval, the first time at once, and
// reclaims and returns the node as the package doc says, until ctx ends.
func (w *Watcher) Run(ctx context.Context) {
	s := state{reclaimed: w.o.Reclaimed, quietSince: time.Now()}
	w.o.Log.InfoContext(ctx, "watching the GPUs for their owner's use", "interval", w.o.Interval,
		"idle_for", w.o.IdleFor, "threshold_percent", w.o.Threshold)
	task.NowAndEvery(ctx, w.o.Interval, func(time.Time) { w.step(ctx, &s) })
}

// state is what Run remembers between samples.
type state struct {
	// reclaimed: the watcher has drained the node and not yet returned it.
	reclaimed bool
	// quietSince is when the quiet began: the last sample that showed
	// the owner's use or failed (a failed sample may have hidden some).
	quietSince time.Time
	// prevLeased is the leased set at the last sample that succeeded;
	// havePrev is whether there was one.
	prevLeased map[string]bool
	havePrev   bool
	// lastErr is the source's failure last logged, so that a source that
	// keeps failing the same way is logged once, not every Interval.
	lastErr string
}

// step takes one sample and acts on it.
func (w *Watcher) step(ctx context.Context, s *state) {
	// The leases are read before the GPUs. A lease holds its GPUs from
	// before its job's first kernel, so a job's utilisation in this
	// sample is on a GPU already in leased; it lets go of them once its
	// last process is gone, and what NVML still averages of that job is
	// on a GPU leased at the sample before (ownerUse).
	leased := w.o.Leased()
	use, err := w.o.Source.Use(ctx)
	now := time.Now()
	if err != nil {
		if ctx.Err() != nil {
			return
		}
		s.quietSince = now
		if msg := err.Error(); msg != s.lastErr {
			s.lastErr = msg
			w.o.Log.WarnContext(ctx, "cannot tell whether the owner uses the GPUs", "err", err)
		}
		return
	}
	if s.lastErr != "" {
		s.lastErr = ""
		w.o.Log.InfoContext(ctx, "GPU use can be read again")
	}
	reason, owner := ownerUse(use, leased, s.prevLeased, s.havePrev, w.o.Threshold)
	s.prevLeased, s.havePrev = leased, true
	switch {
	case owner:
		s.quietSince = now
		if !s.reclaimed {
			s.reclaimed = true
			w.o.Log.InfoContext(ctx, "the owner is using the GPUs: reclaiming the node", "reason", reason)
			w.o.Provider.Reclaim(reason)
		}
	case s.reclaimed && now.Sub(s.quietSince) >= w.o.IdleFor:
		s.reclaimed = false
		w.o.Log.InfoContext(ctx, "the owner has not used the GPUs for "+w.o.IdleFor.String()+": returning the node")
		w.o.Provider.Return()
	}
}

// ownerUse decides whether a sample shows the owner using the machine,
// and says why, naming the first GPU in the sample that shows it. leased
// is the leased set now and prev the one at the sample before (havePrev:
// there was one); a GPU's utilisation is the owner's only when it was
// unleased at both.
func ownerUse(use []exec.GPUUse, leased, prev map[string]bool, havePrev bool, threshold int) (string, bool) {
	for _, u := range use {
		if len(u.ForeignPIDs) > 0 {
			return fmt.Sprintf("owner started using GPU %d (%s)", u.Index, describePIDs(u.ForeignPIDs)), true
		}
	}
	if !havePrev {
		return "", false
	}
	for _, u := range use {
		if u.Utilization > threshold && !leased[u.UUID] && !prev[u.UUID] {
			return fmt.Sprintf("owner started using GPU %d (%d%% busy with no lease on it)", u.Index, u.Utilization), true
		}
	}
	return "", false
}

// describePIDs names the foreign processes of a GPU: "pid 4242", "pids 1,
// 2", or, for a process of unknown PID (0), what is known of it.
func describePIDs(pids []int) string {
	var known []string
	for _, p := range pids {
		if p > 0 {
			known = append(known, strconv.Itoa(p))
		}
	}
	switch len(known) {
	case 0:
		return "a process outside the job sandboxes"
	case 1:
		return "pid " + known[0]
	}
	return "pids " + strings.Join(known, ", ")
}
