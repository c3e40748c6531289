package scale

import (
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/e31network/e31/market"
)

// MarketReport is one run of the market simulation: its parameters, and
// what each design cost the jobs of the same trace.
type MarketReport struct {
	Providers  int     `json:"providers"`
	Load       float64 `json:"load"`
	Hours      float64 `json:"hours"`
	WarmUpH    float64 `json:"warm_up_h"`
	DrainH     float64 `json:"drain_h"`
	Seed       uint64  `json:"seed"`
	Submitters int     `json:"submitters"`
	// JobRun says how long jobs run: every one for the same time, its
	// declared limit.
	JobRun string `json:"job_run"`
	// RoundS is how often Match runs in each market, DigestS how often
	// each subshard publishes its digest, MoveAfterS how long a job waits
	// in a subshard without headroom before it moves.
	RoundS     float64 `json:"round_s"`
	DigestS    float64 `json:"digest_s"`
	MoveAfterS float64 `json:"move_after_s"`
	// Declarations and Jobs are the trace's; Counted the jobs counted (a
	// gang once), those arriving after the warm-up and before the drain.
	Declarations int `json:"declarations"`
	Jobs         int `json:"jobs"`
	Counted      int `json:"counted"`
	// TopSubmitter is the share of the counted jobs from the busiest
	// submitter.
	TopSubmitter float64 `json:"top_submitter"`
	// HashShardCount and Subshards are how many markets the two sharded
	// designs make.
	HashShardCount int     `json:"hash_shard_count"`
	Subshards      int     `json:"subshards"`
	Market         Markets `json:"market"`
	ElapsedS       float64 `json:"elapsed_s"`
}

// Markets holds the class shards design's figures (at its top level) and
// the other two designs' beside them, with the goals checked.
type Markets struct {
	DesignFigures
	HashShards DesignFigures `json:"hash_shards"`
	OneMarket  DesignFigures `json:"one_market"`
	Goals      []MarketGoal  `json:"goals"`
}

// DesignFigures are one design's figures: per class of job, and the share
// of counted jobs stranded.
type DesignFigures struct {
	Markets  int                     `json:"markets"`
	Classes  map[string]ClassFigures `json:"classes"`
	Stranded float64                 `json:"stranded"`
	// Moves counts the jobs (a gang once) moved to another subshard.
	Moves int `json:"moves,omitempty"`
}

// ClassFigures are one class of job's figures in one design.
type ClassFigures struct {
	Jobs int `json:"jobs"`
	// Waited is the share placed later than the first round after their
	// arrival, or never placed; WaitedOneMarket the same in one market.
	Waited          float64 `json:"waited"`
	WaitedOneMarket float64 `json:"waited_one_market"`
	// P50WaitS and P90WaitS are the wait from the first round after
	// arrival; a job never placed counts as waiting to the end of the
	// simulation (a lower bound).
	P50WaitS float64 `json:"p50_wait_s"`
	P90WaitS float64 `json:"p90_wait_s"`
	// Never counts the jobs their market could never hold (or no market
	// fits); Unplaced those it could that still waited at the end.
	Never    int `json:"never"`
	Unplaced int `json:"unplaced"`
	// Stranded is the share that waited while a box that fits them was
	// free somewhere in the network at their arrival.
	Stranded float64 `json:"stranded"`
	// Local, for jobs that read a dataset, is the share placed on a
	// provider that holds it.
	Local *float64 `json:"local,omitempty"`
}

// MarketGoal is one of the goals, checked on the class shards.
type MarketGoal struct {
	Goal string `json:"goal"`
	Met  bool   `json:"met"`
	// Got is what the class shards measured, HashShards the same of hash
	// shards.
	Got        string `json:"got"`
	HashShards string `json:"hash_shards"`
}

func newMarketReport(tr Trace, seed uint64, hash, class, one *design) MarketReport {
	r := MarketReport{
		Providers: len(tr.Offers), WarmUpH: tr.MeasureFrom.Hours(), DrainH: (tr.End - tr.MeasureTo).Hours(),
		Hours: (tr.MeasureTo - tr.MeasureFrom).Hours(), Seed: seed, JobRun: "fixed " + jobRun.String() + " (limit = run)",
		RoundS: marketRound.Seconds(), DigestS: digestEvery.Seconds(), MoveAfterS: float64(market.MoveAfter) / 1000,
		Declarations: len(tr.Jobs), Jobs: len(hash.jobs),
		HashShardCount: len(hash.markets), Subshards: len(class.markets),
	}
	bySub := map[string]int{}
	for _, j := range hash.jobs {
		if counted(tr, j) {
			r.Counted++
			bySub[j.job.Submitter]++
		}
	}
	for _, n := range bySub {
		r.TopSubmitter = max(r.TopSubmitter, float64(n)/float64(max(r.Counted, 1)))
	}
	r.Market.OneMarket = figures(tr, one, nil)
	for k, c := range r.Market.OneMarket.Classes {
		c.WaitedOneMarket = c.Waited
		r.Market.OneMarket.Classes[k] = c
	}
	r.Market.HashShards = figures(tr, hash, &r.Market.OneMarket)
	r.Market.DesignFigures = figures(tr, class, &r.Market.OneMarket)
	r.Market.Goals = goals(r.Market.DesignFigures, r.Market.HashShards)
	return r
}

func counted(tr Trace, j simJob) bool {
	at := tr.Jobs[j.decl].At
	return j.unit && at >= tr.MeasureFrom && at < tr.MeasureTo
}

// figures sums up design d; one, when given, is the one market's.
func figures(tr Trace, d *design, one *DesignFigures) DesignFigures {
	f := DesignFigures{Markets: len(d.markets), Classes: map[string]ClassFigures{}, Moves: d.moves}
	round := marketRound.Milliseconds()
	end := tr.End.Milliseconds()
	waits := map[string][]float64{}
	local := map[string]int{}
	stranded, total := 0, 0
	for i, j := range d.jobs {
		if !counted(tr, j) {
			continue
		}
		t := tr.Jobs[j.decl]
		s := d.state[i]
		c := f.Classes[t.Kind]
		c.Jobs++
		total++
		first := (t.At.Milliseconds() + round - 1) / round * round
		switch {
		case s.placedAt >= 0:
			w := s.placedAt - first
			waits[t.Kind] = append(waits[t.Kind], float64(w)/1000)
			if w > 0 {
				c.Waited++
			}
			if s.local {
				local[t.Kind]++
			}
		case s.never:
			c.Never++
			c.Waited++
			waits[t.Kind] = append(waits[t.Kind], float64(end-first)/1000)
		default:
			c.Unplaced++
			c.Waited++
			waits[t.Kind] = append(waits[t.Kind], float64(end-first)/1000)
		}
		if s.stranded {
			c.Stranded++
			stranded++
		}
		f.Classes[t.Kind] = c
	}
	for k, c := range f.Classes {
		n := float64(c.Jobs)
		c.Waited /= n
		c.Stranded /= n
		w := waits[k]
		slices.Sort(w)
		c.P50WaitS, c.P90WaitS = quantile(w, 0.5), quantile(w, 0.9)
		if one != nil {
			c.WaitedOneMarket = one.Classes[k].Waited
		}
		if k == "data" {
			l := float64(local[k]) / float64(max(c.Jobs-c.Never-c.Unplaced, 1))
			c.Local = &l
		}
		f.Classes[k] = c
	}
	if total > 0 {
		f.Stranded = float64(stranded) / float64(total)
	}
	return f
}

// quantile of sorted values, nearest rank; 0 for none.
func quantile(sorted []float64, q float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	return sorted[min(int(math.Ceil(q*float64(len(sorted))))-1, len(sorted)-1)]
}

// goals checks the goals on the class shards (got) and, for
// contrast, hash shards.
func goals(class, hash DesignFigures) []MarketGoal {
	within := func(f DesignFigures) (bool, string) {
		worst, at := 0.0, ""
		for _, k := range classOrder(f.Classes) {
			c := f.Classes[k]
			if d := c.Waited - c.WaitedOneMarket; d > worst || at == "" {
				worst, at = d, k
			}
		}
		return worst <= 0.05, fmt.Sprintf("worst %s %+.1f points", at, 100*worst)
	}
	gang := func(f DesignFigures) (bool, string) {
		n := f.Classes["gang"].Never
		return n == 0, fmt.Sprintf("%d gangs never placeable", n)
	}
	unrun := func(f DesignFigures) (bool, string) {
		n := 0
		for _, c := range f.Classes {
			n += c.Never + c.Unplaced
		}
		return n == 0, fmt.Sprintf("%d jobs never ran", n)
	}
	strand := func(f DesignFigures) (bool, string) {
		return f.Stranded <= 0.01, fmt.Sprintf("%.2f%% stranded", 100*f.Stranded)
	}
	var gs []MarketGoal
	for _, g := range []struct {
		goal  string
		check func(DesignFigures) (bool, string)
	}{
		{"per class, waited within 5 points of one market", within},
		{"gangs of 8 whole boxes never unplaceable", gang},
		{"no job for a model some provider offers left unrun", unrun},
		{"stranded at most 1%", strand},
	} {
		met, got := g.check(class)
		_, h := g.check(hash)
		gs = append(gs, MarketGoal{Goal: g.goal, Met: met, Got: got, HashShards: h})
	}
	return gs
}

// classOrder lists the classes of figures: the mix's order, then any
// others by name.
func classOrder(classes map[string]ClassFigures) []string {
	var out, rest []string
	for _, k := range jobMix() {
		if _, ok := classes[k.kind]; ok {
			out = append(out, k.kind)
		}
	}
	for k := range classes {
		if !slices.Contains(out, k) {
			rest = append(rest, k)
		}
	}
	slices.Sort(rest)
	return append(out, rest...)
}

// WriteText prints the report: a table of the classes of job, each
// design's figures side by side, then the goals.
func (r MarketReport) WriteText(w io.Writer) error {
	var b strings.Builder
	fmt.Fprintf(&b, "Market simulation: %d providers, load %.0f%%, %d submitters (Zipf; the busiest sent %.1f%% of jobs), seed %d\n",
		r.Providers, 100*r.Load, r.Submitters, 100*r.TopSubmitter, r.Seed)
	fmt.Fprintf(&b, "%g h counted after a %g h warm-up, %g h drain; jobs run %s; Match every %gs in each market\n",
		r.Hours, r.WarmUpH, r.DrainH, r.JobRun, r.RoundS)
	fmt.Fprintf(&b, "%d declarations, %d jobs, %d counted (a gang once); %d hash shards; %d class subshards (digest every %gs, move after %gs, %d moves)\n\n",
		r.Declarations, r.Jobs, r.Counted, r.HashShardCount, r.Subshards, r.DigestS, r.MoveAfterS, r.Market.Moves)
	tw := tabwriter.NewWriter(&b, 2, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "class\tjobs\twaited hash/class/one\tp50 wait s\tp90 wait s\tnever\tunplaced\tstranded\t")
	m := r.Market
	for _, k := range classOrder(m.OneMarket.Classes) {
		h, c, o := m.HashShards.Classes[k], m.Classes[k], m.OneMarket.Classes[k]
		pct := func(x float64) string { return fmt.Sprintf("%.1f", 100*x) }
		row := []string{k, fmt.Sprint(c.Jobs),
			pct(h.Waited) + " / " + pct(c.Waited) + " / " + pct(o.Waited),
			fmt.Sprintf("%.0f / %.0f / %.0f", h.P50WaitS, c.P50WaitS, o.P50WaitS),
			fmt.Sprintf("%.0f / %.0f / %.0f", h.P90WaitS, c.P90WaitS, o.P90WaitS),
			fmt.Sprintf("%d / %d / %d", h.Never, c.Never, o.Never),
			fmt.Sprintf("%d / %d / %d", h.Unplaced, c.Unplaced, o.Unplaced),
			pct(h.Stranded) + " / " + pct(c.Stranded) + " / " + pct(o.Stranded),
		}
		fmt.Fprintln(tw, strings.Join(row, "\t")+"\t")
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(&b, "\nwaited, stranded: %% of the class's jobs; each column hash shards / class shards / one market;\n")
	fmt.Fprintf(&b, "a wait counts from the first round after arrival, a job never placed as waiting to the end (a lower bound)\n")
	fmt.Fprintf(&b, "stranded, all jobs: hash shards %.2f%%, class shards %.2f%%, one market %.2f%%\n",
		100*m.HashShards.Stranded, 100*m.Stranded, 100*m.OneMarket.Stranded)
	if d, ok := m.Classes["data"]; ok && d.Local != nil {
		fmt.Fprintf(&b, "jobs reading a dataset held by %d providers, placed on a holder: hash shards %.0f%%, class shards %.0f%%, one market %.0f%%\n",
			dataHolders, 100*deref(m.HashShards.Classes["data"].Local), 100*deref(d.Local), 100*deref(m.OneMarket.Classes["data"].Local))
	}
	fmt.Fprintf(&b, "\nGoals (class shards; hash shards beside):\n")
	for _, g := range m.Goals {
		mark := "MET    "
		if !g.Met {
			mark = "NOT MET"
		}
		fmt.Fprintf(&b, "  %s  %s: %s (hash shards: %s)\n", mark, g.Goal, g.Got, g.HashShards)
	}
	fmt.Fprintf(&b, "\nsimulated in %s\n", time.Duration(r.ElapsedS*float64(time.Second)).Round(time.Second))
	_, err := io.WriteString(w, b.String())
	return err
}

func deref(p *float64) float64 {
	if p == nil {
		return 0
	}
	return *p
}
