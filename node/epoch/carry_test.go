package epoch

import (
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/e31network/e31/market"
	"github.com/e31network/e31/node/api"
	"github.com/e31network/e31/node/view"
)

// script records the Actions Carry takes, in order.
type script struct{ steps []string }

func (s *script) RecordWaits(res market.Result) {
	s.steps = append(s.steps, fmt.Sprintf("waits %d", len(res.Waiting)))
}
func (s *script) RecordReservations(res market.Result) {
	s.steps = append(s.steps, fmt.Sprintf("reservations %d", len(res.Reservations)))
}
func (s *script) Prestage(rs []market.Reservation) {
	var jobs []string
	for _, r := range rs {
		jobs = append(jobs, r.Job)
	}
	s.steps = append(s.steps, "prestage ["+strings.Join(jobs, " ")+"]")
}
func (s *script) RecordMatch(m api.Match) {
	s.steps = append(s.steps, fmt.Sprintf("match epoch %d jobs %d delay %dms fast %t", m.Epoch, m.Jobs, m.DelayMs, m.Fast))
}
func (s *script) Propose(a market.Assignment, epoch uint64, viewHash string) {
	s.steps = append(s.steps, fmt.Sprintf("propose %s epoch %d view %s", a.Job, epoch, viewHash))
}

var result = market.Result{
	ViewHash: "h",
	Assignments: []market.Assignment{
		{Job: "j1", Provider: "self", Rank: 0},
		{Job: "j2", Provider: "other", Rank: 1},
		{Job: "j3", Provider: "self", Rank: 2},
	},
	Reservations: []market.Reservation{{Job: "r1", Provider: "other"}, {Job: "r2", Provider: "self"}},
	Waiting:      []market.Wait{{Job: "w1", Reason: "no offer"}},
}

// An epoch's result is carried out in the documented order: records
// first, the reservations before the staging they allow, the history
// before the proposals, and only what names this node is staged or
// proposed, in rank order.
func TestCarryOrder(t *testing.T) {
	var s script
	Carry(&s, "self", Pass{Epoch: 9, Jobs: 5, Delay: 150 * time.Millisecond}, result)
	want := []string{
		"waits 1",
		"reservations 2",
		"prestage [r2]",
		"match epoch 9 jobs 5 delay 150ms fast false",
		"propose j1 epoch 9 view h",
		"propose j3 epoch 9 view h",
	}
	if !slices.Equal(s.steps, want) {
		t.Fatalf("steps\n%s\nwant\n%s", strings.Join(s.steps, "\n"), strings.Join(want, "\n"))
	}
}

// Staging is told every epoch, none included, so that it stops for jobs no
// longer reserved here.
func TestCarryPrestagesNone(t *testing.T) {
	var s script
	Carry(&s, "nobody", Pass{Epoch: 1, Jobs: 3}, result)
	if !slices.Contains(s.steps, "prestage []") || slices.ContainsFunc(s.steps, func(st string) bool { return strings.HasPrefix(st, "propose") }) {
		t.Fatalf("steps %q: want an empty prestage and no proposal", s.steps)
	}
}

// A pass between epochs records the match and proposes, nothing more.
func TestCarryFastPass(t *testing.T) {
	var s script
	Carry(&s, "self", Pass{Epoch: 4, Jobs: 3, Fast: true}, result)
	want := []string{
		"match epoch 4 jobs 3 delay 0ms fast true",
		"propose j1 epoch 4 view h",
		"propose j3 epoch 4 view h",
	}
	if !slices.Equal(s.steps, want) {
		t.Fatalf("steps %q, want %q", s.steps, want)
	}
}

// An epoch whose view holds no job is cut, told to Cut, and passed over:
// nothing is carried out.
func TestLoopPassesOverAnEmptyView(t *testing.T) {
	var s script
	var cuts []string
	pruned := 0
	l := Loop{
		Clock:   Clock{Length: time.Second, Fixed: 100 * time.Millisecond, Offers: view.NewOffers()},
		Market:  view.NewMarket(),
		Self:    "self",
		Actions: &s,
		Prune:   func() { pruned++ },
		Cut:     func(e uint64, d time.Duration, jobs int) { cuts = append(cuts, fmt.Sprint(e, d, jobs)) },
		Log:     slog.New(slog.DiscardHandler),
	}
	l.Match(3, time.UnixMilli(3000), 100*time.Millisecond)
	if len(s.steps) != 0 || !slices.Equal(cuts, []string{"3 100ms 0"}) || pruned != 1 {
		t.Fatalf("steps %q, cuts %q, pruned %d", s.steps, cuts, pruned)
	}
}

// A panic in a pass fails that pass only: logged with its stack, told to
// Panicked under PanicMatch.
func TestPassPanicRecovered(t *testing.T) {
	var logs strings.Builder
	var where []string
	log := slog.New(slog.NewTextHandler(&logs, nil))
	panicked := func(w string) { where = append(where, w) }
	// No views: the pass's first look at them panics.
	l := Loop{Clock: Clock{Length: time.Second}, Log: log, Panicked: panicked}
	l.Match(7, time.Now(), time.Second)
	f := FastPath{Log: log, Panicked: panicked}
	f.Pass(time.Now())
	if !slices.Equal(where, []string{PanicMatch, PanicMatch}) {
		t.Fatalf("panicked %q, want match twice", where)
	}
	for _, s := range []string{`msg="panic recovered" where=match panic=`, `epoch=7 stack=`, `pass=fast stack=`} {
		if !strings.Contains(logs.String(), s) {
			t.Errorf("log lacks %s:\n%s", s, logs.String())
		}
	}
}

func TestClockOf(t *testing.T) {
	c := Clock{Length: 2 * time.Second}
	e, start := c.Of(time.UnixMilli(1_700_000_001_999))
	if e != 850_000_000 || !start.Equal(time.UnixMilli(1_700_000_000_000)) {
		t.Fatalf("Of = %d, %s", e, start)
	}
	if !c.Adaptive() || (Clock{Fixed: time.Millisecond}).Adaptive() {
		t.Fatal("only a zero Fixed adapts")
	}
}

// History keeps the last historySize results, oldest first.
func TestHistory(t *testing.T) {
	var h History
	for i := range historySize + 3 {
		h.Add(api.Match{Epoch: uint64(i)})
	}
	all := h.All()
	if len(all) != historySize || all[0].Epoch != 3 || all[len(all)-1].Epoch != historySize+2 {
		t.Fatalf("kept %d, from %d to %d", len(all), all[0].Epoch, all[len(all)-1].Epoch)
	}
}
