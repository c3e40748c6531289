package epoch

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/e31network/e31/market"
	"github.com/e31network/e31/node/task"
)

// Result is what one run measured.
type Result struct {
	Latency time.Duration
	Mode    string
	Jobs    int
	// Leased counts jobs whose submitter accepted a proposal before the
	// run ended.
	Leased int
	// Lost counts lost rounds (see the package doc); LostSplit those where
	// the provider's own Match did not give it the job (the views or delays
	// differed), LostBusy those where it did but the provider held the GPUs
	// for another job, LostStale those where the job was already closed in
	// the provider's view.
	Lost, LostSplit, LostBusy, LostStale int
	// Declined counts proposals the submitter refused: the job was already
	// leased to another.
	Declined int
	// BusyEpochs counts epochs in which some peer's view held a job;
	// SplitViews those in which not every peer had the same view hash.
	BusyEpochs, SplitViews int
	// MeanDelay and MaxDelay are the epoch delays the providers cut with,
	// over busy epochs; DelaySplits counts busy epochs in which the peers
	// did not all derive the same delay.
	MeanDelay, MaxDelay time.Duration
	DelaySplits         int
	// ToLease is the time from a job's declaration to its submitter's
	// acceptance of a proposal: mean and 90th percentile.
	ToLeaseMean, ToLeaseP90 time.Duration
	// Gossip holds the gossip delays observed (arrival minus signing time)
	// by message kind, over every peer.
	Gossip map[string]Quantiles
	// Lag is how late a 10ms timer fired in the run's process: the CPU's
	// share of every delay above.
	Lag Quantiles
}

// Quantiles summarises durations.
type Quantiles struct {
	N             int
	P50, P99, Max time.Duration
}

func quantiles(d []time.Duration) Quantiles {
	if len(d) == 0 {
		return Quantiles{}
	}
	s := slices.Clone(d)
	slices.Sort(s)
	at := func(q float64) time.Duration { return s[min(int(q*float64(len(s))), len(s)-1)] }
	return Quantiles{N: len(s), P50: at(0.5), P99: at(0.99), Max: s[len(s)-1]}
}

// epochRecord is one peer's pass of one epoch.
type epochRecord struct {
	jobs     int
	delay    time.Duration
	viewHash string            // "" for a view without jobs, which is not matched
	assigned map[string]string // job → provider
	busy     []string          // jobs given to this provider on GPUs it held
}

// recorder collects every peer's Match of every epoch, the proposals and
// the delays, for counting once the run is over.
type recorder struct {
	mu          sync.Mutex // guards everything below
	started     bool
	submitterOf map[string]string                 // job → its submitter
	declaredAt  map[string]time.Time              // job → signing time
	epochs      map[uint64]map[string]epochRecord // epoch → peer → its pass
	acceptedIn  map[string]uint64                 // job → epoch of the accepted proposal
	acceptedAt  map[string]time.Time
	declines    int
	samples     map[string][]time.Duration
	lag         []time.Duration
}

func newRecorder() *recorder {
	return &recorder{
		submitterOf: make(map[string]string),
		declaredAt:  make(map[string]time.Time),
		epochs:      make(map[uint64]map[string]epochRecord),
		acceptedIn:  make(map[string]uint64),
		acceptedAt:  make(map[string]time.Time),
		samples:     make(map[string][]time.Duration),
	}
}

// start begins counting samples: the warmup's are left out.
func (r *recorder) start() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.started = true
}

func (r *recorder) sample(kind string, d time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.started {
		r.samples[kind] = append(r.samples[kind], d)
	}
}

// probeLag measures how late timers fire, which on a loaded machine is
// part of every gossip delay.
func (r *recorder) probeLag(ctx context.Context) {
	const tick = 10 * time.Millisecond
	for {
		want := time.Now().Add(tick)
		if task.Sleep(ctx, tick) != nil {
			return
		}
		late := time.Since(want)
		r.mu.Lock()
		if r.started {
			r.lag = append(r.lag, late)
		}
		r.mu.Unlock()
	}
}

func (r *recorder) declared(job, submitter string, at time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.submitterOf[job] = submitter
	r.declaredAt[job] = at
}

// cut records a peer's cut of an epoch: the delay it cut with and the jobs
// its view held. A pass with jobs goes on to matched, then busy.
func (r *recorder) cut(epoch uint64, peer string, delay time.Duration, jobs int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.epochs[epoch] == nil {
		r.epochs[epoch] = make(map[string]epochRecord)
	}
	r.epochs[epoch][peer] = epochRecord{jobs: jobs, delay: delay, assigned: make(map[string]string)}
}

// matched records what a peer's pass of an epoch assigned, on the view of
// hash viewHash.
func (r *recorder) matched(epoch uint64, peer, viewHash string, assignments []market.Assignment) {
	r.mu.Lock()
	defer r.mu.Unlock()
	rec := r.epochs[epoch][peer]
	rec.viewHash = viewHash
	for _, a := range assignments {
		rec.assigned[a.Job] = a.Provider
	}
	r.epochs[epoch][peer] = rec
}

// busy records that a provider's pass of an epoch gave it job on GPUs it
// held for another.
func (r *recorder) busy(epoch uint64, peer, job string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	rec := r.epochs[epoch][peer]
	rec.busy = append(rec.busy, job)
	r.epochs[epoch][peer] = rec
}

func (r *recorder) accepted(job string, epoch uint64, at time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.acceptedIn[job] = epoch
	r.acceptedAt[job] = at
}

func (r *recorder) declined(string, uint64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.declines++
}

func (r *recorder) leasedJobs() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.acceptedIn)
}

// result counts over the epochs in which every peer matched (the run's
// last one may be cut short).
func (r *recorder) result(providers, submitters []*simPeer) Result {
	r.mu.Lock()
	defer r.mu.Unlock()
	res := Result{Leased: len(r.acceptedIn), Declined: r.declines, Gossip: make(map[string]Quantiles), Lag: quantiles(r.lag)}
	for k, s := range r.samples {
		res.Gossip[k] = quantiles(s)
	}
	var toLease []time.Duration
	for j, at := range r.acceptedAt {
		if d, ok := r.declaredAt[j]; ok {
			toLease = append(toLease, at.Sub(d))
		}
	}
	if q := quantiles(toLease); q.N > 0 {
		var sum time.Duration
		for _, d := range toLease {
			sum += d
		}
		res.ToLeaseMean = sum / time.Duration(q.N)
		slices.Sort(toLease)
		res.ToLeaseP90 = toLease[min(q.N*9/10, q.N-1)]
	}
	all := slices.Concat(providers, submitters)
	var epochs []uint64
	for e, byPeer := range r.epochs {
		if len(byPeer) == len(all) {
			epochs = append(epochs, e)
		}
	}
	slices.Sort(epochs)
	var delaySum time.Duration
	var delayN int
	for _, e := range epochs {
		byPeer := r.epochs[e]
		busy := false
		for _, rec := range byPeer {
			busy = busy || rec.jobs > 0
		}
		if !busy {
			continue
		}
		res.BusyEpochs++
		first := byPeer[all[0].id.String()]
		split, delaySplit := false, false
		for _, sp := range all {
			rec := byPeer[sp.id.String()]
			split = split || rec.viewHash != first.viewHash
			delaySplit = delaySplit || rec.delay != first.delay
		}
		if split {
			res.SplitViews++
		}
		if delaySplit {
			res.DelaySplits++
		}
		for _, sp := range providers {
			d := byPeer[sp.id.String()].delay
			delaySum += d
			delayN++
			res.MaxDelay = max(res.MaxDelay, d)
		}
		for _, sp := range submitters {
			for job, prov := range byPeer[sp.id.String()].assigned {
				if r.submitterOf[job] != sp.id.String() {
					continue
				}
				if ae, ok := r.acceptedIn[job]; ok && ae <= e {
					continue // leased on a proposal of this epoch or before
				}
				res.Lost++
				pr := byPeer[prov]
				switch {
				case pr.assigned[job] != prov:
					res.LostSplit++
				case slices.Contains(pr.busy, job):
					res.LostBusy++
				default:
					res.LostStale++
				}
			}
		}
	}
	if delayN > 0 {
		res.MeanDelay = delaySum / time.Duration(delayN)
	}
	return res
}

// Summary is the mean of several runs of one latency and mode.
type Summary struct {
	// LostPer100 is the mean of the runs' lost rounds per 100 jobs; Min and
	// Max the extremes.
	LostPer100, LostPer100Min, LostPer100Max float64
	// Summed over the runs.
	LostSplit, LostBusy, LostStale, SplitViews, BusyEpochs int
	DeclinedPer100                                         float64
	// MaxDelay is the largest over the runs; the rest are means.
	MeanDelay, MaxDelay, ToLeaseMean time.Duration
	// Gossip delays of declarations (the messages a cut must not miss),
	// and timer lateness, as means over the runs.
	GossipP50, GossipP99, LagP99 time.Duration
}

// Summarise averages runs.
func Summarise(runs []Result) Summary {
	var s Summary
	if len(runs) == 0 {
		return s
	}
	n := float64(len(runs))
	s.LostPer100Min = 1e9
	var mean, toLease, p50, p99, lag time.Duration
	for _, r := range runs {
		per := 100 * float64(r.Lost) / float64(max(r.Jobs, 1))
		s.LostPer100 += per / n
		s.LostPer100Min = min(s.LostPer100Min, per)
		s.LostPer100Max = max(s.LostPer100Max, per)
		s.DeclinedPer100 += 100 * float64(r.Declined) / float64(max(r.Jobs, 1)) / n
		s.LostSplit += r.LostSplit
		s.LostBusy += r.LostBusy
		s.LostStale += r.LostStale
		s.SplitViews += r.SplitViews
		s.BusyEpochs += r.BusyEpochs
		s.MaxDelay = max(s.MaxDelay, r.MaxDelay)
		mean += r.MeanDelay
		toLease += r.ToLeaseMean
		p50 += r.Gossip["declaration"].P50
		p99 += r.Gossip["declaration"].P99
		lag += r.Lag.P99
	}
	k := time.Duration(len(runs))
	s.MeanDelay, s.ToLeaseMean, s.GossipP50, s.GossipP99, s.LagP99 = mean/k, toLease/k, p50/k, p99/k, lag/k
	return s
}
