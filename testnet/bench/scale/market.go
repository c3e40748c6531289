package scale

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"time"

	"github.com/e31network/e31/market"
	"github.com/e31network/e31/p2p"
	"github.com/libp2p/go-libp2p/core/peer"
)

// The simulation's clock: Match runs in every market each round, and each
// subshard publishes its digest every digestEvery (stale in between, as
// in the network).
const (
	marketRound = 10 * time.Second
	digestEvery = time.Minute
)

// The three designs, as the report names them.
const (
	designHash  = "hash shards"
	designClass = "class shards"
	designOne   = "one market"
)

// RunMarket simulates the market of o's trace three times, once per
// design (hash shards, class shards with routing, one market), and
// reports what each costs the jobs, side by side.
func RunMarket(ctx context.Context, logf func(string, ...any), o MarketOptions) (MarketReport, error) {
	o = o.withDefaults()
	if err := o.check(); err != nil {
		return MarketReport{}, err
	}
	began := time.Now()
	tr := NewTrace(o)
	logf("market simulation: %d providers, %d declarations over %s, load %.0f%%, seed %d",
		len(tr.Offers), len(tr.Jobs), tr.End, 100*o.Load, o.Seed)
	r, err := simulateMarket(ctx, logf, tr, o.Seed)
	if err != nil {
		return MarketReport{}, err
	}
	r.Load, r.Hours, r.Submitters = o.Load, o.Hours, o.Submitters
	r.ElapsedS = time.Since(began).Seconds()
	return r, nil
}

// simJob is one job of the trace as the markets see it: a declaration's
// job, a gang's part or an array's task.
type simJob struct {
	decl int // in the trace
	job  market.Job
	// unit: the job is counted in the report (every job, and a gang once,
	// by its part 0).
	unit  bool
	roots []string
}

// expand turns the trace's declarations into jobs, and lists each
// declaration's.
func expand(tr Trace) (jobs []simJob, decls [][]int) {
	decls = make([][]int, len(tr.Jobs))
	for d, t := range tr.Jobs {
		var roots []string
		for _, x := range t.Data {
			roots = append(roots, x.Root)
		}
		add := func(id string, unit bool) {
			decls[d] = append(decls[d], len(jobs))
			jobs = append(jobs, simJob{decl: d, unit: unit, roots: roots, job: market.Job{
				ID: id, Submitter: t.Submitter, Request: t.Request, Data: t.Data,
			}})
		}
		switch {
		case t.Request.Nodes >= 2:
			for i := range t.Request.Nodes {
				add(market.TaskID(fmt.Sprintf("g%06d", d), i), i == 0)
			}
		case t.Tasks >= 2:
			for i := range t.Tasks {
				add(market.TaskID(fmt.Sprintf("a%06d", d), i), true)
			}
		default:
			add(fmt.Sprintf("j%06d", d), true)
		}
	}
	return jobs, decls
}

// jobState is where one job stands in one design.
type jobState struct {
	market   int   // where it is declared; -1: nowhere
	placedAt int64 // ms since the start; -1: not placed
	never    bool  // its market could never hold it, or no market fits it
	stranded bool  // it waited while a box that fits it was free
	local    bool  // placed on a provider that holds its data
}

// design is one way of splitting the market, simulated over the trace.
// It is used by one goroutine.
type design struct {
	name    string
	tr      Trace
	jobs    []simJob
	decls   [][]int
	markets []*simMarket
	state   []jobState
	// route says which market a declaration goes to, -1 for none.
	route func(d int) int
	// routed: jobs are routed on digests and moved (class shards).
	routed  bool
	digests []market.Digest
	byName  map[subshard]int
	rng     *rand.Rand
	moves   int
	fits    map[[2]string]bool
}

func newDesign(name string, tr Trace, seed uint64) *design {
	d := &design{name: name, tr: tr, rng: rand.New(rand.NewPCG(seed, uint64(len(name)))), fits: map[[2]string]bool{}}
	d.jobs, d.decls = expand(tr)
	d.state = make([]jobState, len(d.jobs))
	for i := range d.state {
		d.state[i] = jobState{market: -1, placedAt: -1}
	}
	return d
}

// hashShards is today's design: providers split into p2p.SuggestShards
// shards by a hash of their IDs, each submitter's jobs in its own shard.
func hashShards(tr Trace, seed uint64) *design {
	d := newDesign(designHash, tr, seed)
	n := p2p.SuggestShards(len(tr.Offers))
	parts := make([][]market.Offer, n)
	for _, o := range tr.Offers {
		s := p2p.ShardOf(peer.ID(o.Provider), n).Index
		parts[s] = append(parts[s], o)
	}
	for s, offers := range parts {
		d.markets = append(d.markets, newSimMarket(fmt.Sprintf("shard-%d-of-%d", s, n), offers))
	}
	d.route = func(i int) int { return p2p.ShardOf(peer.ID(tr.Jobs[i].Submitter), n).Index }
	return d
}

// classShards is the new design: providers grouped by market.ClassOf
// their GPUs, a class of more than p2p.ShardProviders split into hash
// subshards; each declaration routed by market.Route over the subshards'
// last digests, and moved by market.Move.
func classShards(tr Trace, seed uint64) *design {
	d := newDesign(designClass, tr, seed)
	byClass := map[market.Class][]market.Offer{}
	var classes []market.Class
	for _, o := range tr.Offers {
		c := market.ClassOf(o.GPUs)
		if _, ok := byClass[c]; !ok {
			classes = append(classes, c)
		}
		byClass[c] = append(byClass[c], o)
	}
	d.byName = map[subshard]int{}
	for _, c := range classes {
		n := p2p.SuggestShards(len(byClass[c]))
		parts := make([][]market.Offer, n)
		for _, o := range byClass[c] {
			s := p2p.ShardOf(peer.ID(o.Provider), n).Index
			parts[s] = append(parts[s], o)
		}
		for s, offers := range parts {
			m := newSimMarket(fmt.Sprintf("%s/%d-of-%d", c, s, n), offers)
			m.digest = market.Digest{Class: c, Index: s, Count: n}
			d.byName[subshard{c, s, n}] = len(d.markets)
			d.markets = append(d.markets, m)
		}
	}
	d.routed = true
	d.route = func(i int) int {
		j := d.jobs[d.decls[i][0]]
		to, ok := market.Route(j.job.Request, j.roots, d.digests, d.rng.IntN)
		if !ok {
			return -1
		}
		return d.marketOf(to)
	}
	return d
}

func (d *design) marketOf(dg market.Digest) int {
	return d.byName[subshard{dg.Class, dg.Index, dg.Count}]
}

// subshard names a class's subshard.
type subshard struct {
	class        market.Class
	index, count int
}

// oneMarket is every provider and every job in one market.
func oneMarket(tr Trace, seed uint64) *design {
	d := newDesign(designOne, tr, seed)
	d.markets = []*simMarket{newSimMarket("one", append([]market.Offer(nil), tr.Offers...))}
	d.route = func(int) int { return 0 }
	return d
}

// run simulates the whole trace, a round every marketRound.
func (d *design) run(ctx context.Context, logf func(string, ...any)) error {
	round := marketRound.Milliseconds()
	end := d.tr.End.Milliseconds()
	next := 0 // the next declaration to arrive
	hour := int64(0)
	for epoch, now := uint64(0), int64(0); now < end; epoch, now = epoch+1, now+round {
		if err := ctx.Err(); err != nil {
			return err
		}
		if now/3600_000 > hour {
			hour = now / 3600_000
			logf("%s: %dh of %s simulated, %d declarations arrived", d.name, hour, d.tr.End, next)
		}
		for _, m := range d.markets {
			m.release(now)
		}
		if d.routed && now%digestEvery.Milliseconds() == 0 {
			d.digests = d.digests[:0]
			for _, m := range d.markets {
				m.publish(now)
				d.digests = append(d.digests, m.digest)
			}
		}
		first := make([]int, 0, 16)
		for ; next < len(d.tr.Jobs) && d.tr.Jobs[next].At.Milliseconds() <= now; next++ {
			first = append(first, d.decls[next]...)
			d.declare(next, now)
		}
		if d.routed {
			d.move(now)
		}
		for _, m := range d.markets {
			placed, err := m.match(epoch, now, func(i int) int64 { return d.tr.Jobs[d.jobs[i].decl].Run.Milliseconds() })
			if err != nil {
				return err
			}
			for _, p := range placed {
				s := &d.state[p.idx]
				s.placedAt = now
				for _, r := range d.jobs[p.idx].roots {
					s.local = s.local || p.provider.Holdings.Lists(r)
				}
			}
		}
		d.strand(first)
	}
	return nil
}

// declare opens declaration i's jobs in the market its design routes it
// to, at now.
func (d *design) declare(i int, now int64) {
	mi := d.route(i)
	for _, j := range d.decls[i] {
		s := &d.state[j]
		if mi < 0 {
			s.never = true
			continue
		}
		m := d.markets[mi]
		s.market = mi
		s.never = m.neverHeld(d.jobs[j].job.Request)
		m.declare(j, d.jobs[j].job, now)
	}
}

// move withdraws from its subshard each job (a gang whole) that has
// waited market.MoveAfter there while its digest shows no headroom, and
// declares it in the subshard market.Move draws.
func (d *design) move(now int64) {
	type moving struct{ from, to, pos int }
	var moves []moving
	for mi, m := range d.markets {
		for pos, o := range m.open {
			j := &d.jobs[o.idx]
			if j.job.Request.Nodes >= 2 && !j.unit {
				continue // a gang moves with its part 0
			}
			waited := market.Duration(now - o.declared)
			to, ok := market.Move(j.job.Request, j.roots, waited, 0, m.digest, d.digests, d.rng.IntN)
			if !ok {
				continue
			}
			moves = append(moves, moving{from: mi, to: d.marketOf(to), pos: pos})
		}
	}
	drops := map[int][]bool{}
	for _, mv := range moves {
		from := d.markets[mv.from]
		if drops[mv.from] == nil {
			drops[mv.from] = make([]bool, len(from.open))
		}
		idx := from.open[mv.pos].idx
		group := []int{mv.pos}
		if d.jobs[idx].job.Request.Nodes >= 2 {
			group = group[:0]
			for pos, o := range from.open {
				if d.jobs[o.idx].decl == d.jobs[idx].decl {
					group = append(group, pos)
				}
			}
		}
		for _, pos := range group {
			o := from.open[pos]
			drops[mv.from][pos] = true
			d.markets[mv.to].declare(o.idx, d.jobs[o.idx].job, now)
			d.state[o.idx].market = mv.to
		}
		d.moves++
	}
	for mi := range d.markets {
		if drop := drops[mi]; drop != nil {
			d.markets[mi].withdraw(drop)
		}
	}
}

// strand marks the jobs that arrived this round and still wait, while a
// box that fits them (enough of them, in one market, for a gang) is free
// anywhere in the network.
func (d *design) strand(arrived []int) {
	free := map[market.Request]bool{}
	for _, j := range arrived {
		s := &d.state[j]
		if !d.jobs[j].unit || s.placedAt >= 0 {
			continue
		}
		r := d.jobs[j].job.Request
		f, ok := free[r]
		if !ok {
			f = d.freeBoxes(r)
			free[r] = f
		}
		s.stranded = f
	}
}

// freeBoxes reports whether some market holds enough boxes free for r.
func (d *design) freeBoxes(r market.Request) bool {
	for _, m := range d.markets {
		n := 0
		for i := range m.offers {
			o := &m.offers[i]
			if len(o.GPUs) == 0 || len(o.GPUs)-m.used[i] < r.GPUs || o.GPUs[0].MemoryBytes < uint64(r.GPUMemory) {
				continue
			}
			k := [2]string{o.GPUs[0].Model, r.GPUModel}
			f, ok := d.fits[k]
			if !ok {
				f = market.ModelMatches(k[0], k[1])
				d.fits[k] = f
			}
			if f {
				if n++; n >= max(r.Nodes, 1) {
					return true
				}
			}
		}
	}
	return false
}

// simulateMarket runs the three designs over tr, side by side.
func simulateMarket(ctx context.Context, logf func(string, ...any), tr Trace, seed uint64) (MarketReport, error) {
	designs := []*design{hashShards(tr, seed), classShards(tr, seed), oneMarket(tr, seed)}
	errs := make([]error, len(designs))
	var wg sync.WaitGroup
	for i, d := range designs {
		wg.Go(func() { errs[i] = d.run(ctx, logf) })
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return MarketReport{}, fmt.Errorf("market simulation: %w", err)
		}
	}
	r := newMarketReport(tr, seed, designs[0], designs[1], designs[2])
	var names []string
	for _, m := range designs[1].markets {
		names = append(names, m.name)
	}
	logf("class subshards: %s", strings.Join(names, " "))
	return r, nil
}
