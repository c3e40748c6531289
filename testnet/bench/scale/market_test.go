package scale

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/e31network/e31/market"
	"github.com/e31network/e31/p2p"
	"github.com/libp2p/go-libp2p/core/peer"
)

// offersOf makes n offers of box kind k, named prefix000000 on.
func offersOf(prefix string, n int, k boxKind) []market.Offer {
	var out []market.Offer
	for i := range n {
		out = append(out, simOffer(fmt.Sprintf("%s%06d", prefix, i), k))
	}
	return out
}

func traceJob(kind, submitter string, at time.Duration, gpus int, model string) TraceJob {
	return TraceJob{
		Kind: kind, Submitter: submitter, At: at, Run: 5 * time.Minute,
		Request: market.Request{GPUs: gpus, GPUModel: model, CPUs: 4 * gpus, Memory: market.Size(16 * gpus * market.GiB), Limit: 5 * market.Minute},
	}
}

func simulate(t *testing.T, tr Trace) MarketReport {
	t.Helper()
	r, err := simulateMarket(context.Background(), t.Logf, tr, 1)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// A rare model held by one provider: in hash shards the jobs of
// submitters outside its shard can never run, and are counted "never";
// class shards and one market run them all.
func TestMarketRareModelNeverInOtherHashShards(t *testing.T) {
	offers := offersOf("c", 600, consumerBox()) // 4 hash shards
	b200 := simOffer("rare", boxMix()[len(boxMix())-1])
	offers = append(offers, b200)
	shards := p2p.SuggestShards(len(offers))
	if shards < 2 {
		t.Fatalf("%d providers make %d hash shards; the test needs several", len(offers), shards)
	}
	home := p2p.ShardOf(peer.ID(b200.Provider), shards).Index
	tr := Trace{Offers: offers, MeasureTo: 2 * time.Hour, End: 3 * time.Hour}
	outside := 0
	for i := range 12 {
		s := fmt.Sprintf("s%02d", i)
		if p2p.ShardOf(peer.ID(s), shards).Index != home {
			outside++
		}
		tr.Jobs = append(tr.Jobs, traceJob("B200x8", s, time.Duration(i)*10*time.Minute, 8, "B200"))
	}
	if outside == 0 || outside == 12 {
		t.Fatalf("%d of 12 submitters outside the rare box's shard; the test needs some of each", outside)
	}
	r := simulate(t, tr)
	h := r.Market.HashShards.Classes["B200x8"]
	if h.Never != outside {
		t.Errorf("hash shards: %d B200 jobs never, want %d (their submitters' shards hold none)", h.Never, outside)
	}
	if outside*10 > 12 && h.P90WaitS < time.Hour.Seconds() {
		t.Errorf("hash shards: p90 wait %.0fs with %d of 12 jobs never placed, want them counted as waiting to the end", h.P90WaitS, outside)
	}
	for name, f := range map[string]DesignFigures{"class shards": r.Market.DesignFigures, "one market": r.Market.OneMarket} {
		c := f.Classes["B200x8"]
		if c.Jobs != 12 || c.Never != 0 || c.Unplaced != 0 || c.Waited != 0 {
			t.Errorf("%s: B200 jobs %+v, want 12 placed at once", name, c)
		}
	}
	if !r.Market.Goals[2].Met || r.Market.Goals[2].HashShards == "0 jobs never ran" {
		t.Errorf("goal of no job left unrun: %+v", r.Market.Goals[2])
	}
}

// A submitter that asks for more than its hash shard holds waits while
// other shards' boxes are free: those jobs are stranded. One market runs
// them all at once.
func TestMarketHotShardStrandsJobs(t *testing.T) {
	offers := offersOf("c", 600, consumerBox())
	shards := p2p.SuggestShards(len(offers))
	home := p2p.ShardOf(peer.ID("hot"), shards).Index
	inShard := 0
	for _, o := range offers {
		if p2p.ShardOf(peer.ID(o.Provider), shards).Index == home {
			inShard++
		}
	}
	const extra = 5
	tr := Trace{Offers: offers, MeasureTo: time.Minute, End: 2 * time.Hour}
	for range inShard + extra {
		j := traceJob("consumer-24G", "hot", 0, 1, "RTX 4090")
		j.Run = time.Hour
		tr.Jobs = append(tr.Jobs, j)
	}
	r := simulate(t, tr)
	n := float64(inShard + extra)
	h := r.Market.HashShards.Classes["consumer-24G"]
	if want := extra / n; h.Waited != want || h.Stranded != want || r.Market.HashShards.Stranded != want {
		t.Errorf("hash shards: waited %.4f, stranded %.4f (all jobs %.4f); want %.4f: %d jobs past the shard's %d boxes",
			h.Waited, h.Stranded, r.Market.HashShards.Stranded, want, extra, inShard)
	}
	if h.P90WaitS != 0 || h.Unplaced != 0 {
		t.Errorf("hash shards: %+v; the p90 job is placed at once, and all are placed once the first end", h)
	}
	o := r.Market.OneMarket.Classes["consumer-24G"]
	if o.Waited != 0 || o.Stranded != 0 || o.Jobs != inShard+extra {
		t.Errorf("one market: %+v, want all %d placed at once", o, inShard+extra)
	}
	if c := r.Market.Classes["consumer-24G"]; c.Waited > h.Waited || c.WaitedOneMarket != 0 {
		t.Errorf("class shards: %+v, want no more waiting than hash shards (%.4f)", c, h.Waited)
	}
}

// A gang that waited past market.MoveAfter in a subshard with no room
// moves, all its parts together, to a subshard of its class that has
// room, and a lone job likewise.
func TestMarketMovesWaitingJobsWhole(t *testing.T) {
	h100 := boxMix()[0]
	offers := offersOf("h", 600, h100) // H100x8 in several subshards
	tr := Trace{Offers: offers, End: time.Hour, Jobs: []TraceJob{
		traceJob("gang", "s1", 0, 8, "H100"),
		traceJob("H100x8", "s2", 0, 8, "H100"),
	}}
	tr.Jobs[0].Request.Nodes = 3
	d := classShards(tr, 1)
	if len(d.markets) < 2 {
		t.Fatalf("%d subshards of H100x8, want several", len(d.markets))
	}
	full := d.markets[0]
	for i, o := range full.offers {
		full.used[i] = len(o.GPUs)
	}
	for _, m := range d.markets {
		m.publish(0)
		d.digests = append(d.digests, m.digest)
	}
	for _, js := range d.decls {
		for _, j := range js {
			full.declare(j, d.jobs[j].job, 0)
			d.state[j].market = 0
		}
	}
	d.move(int64(market.MoveAfter) - 1)
	if len(full.open) != 4 || d.moves != 0 {
		t.Fatalf("before MoveAfter: %d open, %d moves; want all 4 jobs staying", len(full.open), d.moves)
	}
	d.move(int64(market.MoveAfter))
	if len(full.open) != 0 || d.moves != 2 {
		t.Fatalf("after MoveAfter: %d open in the full subshard, %d moves; want none left, 2 moves", len(full.open), d.moves)
	}
	gang := d.state[d.decls[0][0]].market
	for _, j := range d.decls[0] {
		if d.state[j].market != gang || gang == 0 {
			t.Errorf("gang part %s in market %d, part 0 in %d: want all together, out of the full one", d.jobs[j].job.ID, d.state[j].market, gang)
		}
	}
	for _, j := range append(d.decls[0], d.decls[1]...) {
		m := d.markets[d.state[j].market]
		found := false
		for _, o := range m.open {
			found = found || o.idx == j
		}
		if !found || m.open[0].declared != int64(market.MoveAfter) {
			t.Errorf("job %s not open in %s since the move", d.jobs[j].job.ID, m.name)
		}
	}
}

// The same seed gives the same report, byte for byte but for the time it
// took; another seed another trace.
func TestMarketSameSeedSameReport(t *testing.T) {
	o := MarketOptions{Providers: 300, Hours: 0.5, WarmUp: 20 * time.Minute, Drain: 20 * time.Minute, Seed: 7}
	run := func(o MarketOptions) string {
		r, err := RunMarket(context.Background(), t.Logf, o)
		if err != nil {
			t.Fatal(err)
		}
		if r.Counted == 0 || len(r.Market.Classes) < 5 {
			t.Fatalf("a report of %d jobs in %d classes", r.Counted, len(r.Market.Classes))
		}
		r.ElapsedS = 0
		b, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	a, b := run(o), run(o)
	if a != b {
		t.Fatalf("same seed, two reports:\n%s\n%s", a, b)
	}
	o.Seed = 8
	if c := run(o); c == a {
		t.Fatal("seeds 7 and 8 gave the same report")
	}
}

// The trace's pools are loaded as asked: the GPU-hours its jobs ask per
// hour over the GPUs of the network.
func TestMarketTraceLoad(t *testing.T) {
	o := MarketOptions{Providers: 2000, Load: 0.6, Hours: 10, Seed: 3}.withDefaults()
	tr := NewTrace(o)
	gpus := 0
	for _, of := range tr.Offers {
		gpus += len(of.GPUs)
	}
	asked := 0.0
	for _, j := range tr.Jobs {
		asked += float64(j.Request.GPUs*max(j.Request.Nodes, 1)*max(j.Tasks, 1)) * j.Run.Hours()
	}
	load := asked / tr.End.Hours() / float64(gpus)
	if load < 0.55 || load > 0.65 {
		t.Errorf("offered load %.3f, want about 0.6", load)
	}
	if len(tr.Offers) != 2000 {
		t.Errorf("%d providers, want 2000", len(tr.Offers))
	}
}

func TestMarketOptionsChecked(t *testing.T) {
	for _, o := range []MarketOptions{{Load: 0.95}, {Load: 0.3}, {Providers: 5}, {Hours: -1}} {
		if _, err := RunMarket(context.Background(), t.Logf, o); err == nil {
			t.Errorf("%+v: no error", o)
		}
	}
}
