package submitter

import (
	"slices"
	"testing"
	"time"

	"github.com/e31network/e31/node/api"
	"pgregory.net/rapid"
)

// donePoints is a curve of completions: points in time order, counts
// rising to the number completed, at the latest completion, within the
// bound, and every point one the tasks' times make true.
func TestDonePoints(t *testing.T) {
	if donePoints(nil) != nil {
		t.Fatal("points for no completion")
	}
	t0 := time.Date(2026, 12, 4, 0, 0, 0, 0, time.UTC)
	rapid.Check(t, func(t *rapid.T) {
		offsets := rapid.SliceOfN(rapid.IntRange(0, 3600), 1, 5000).Draw(t, "offsets")
		ended := make([]time.Time, len(offsets))
		for i, o := range offsets {
			ended[i] = t0.Add(time.Duration(o) * time.Second)
		}
		pts := donePoints(slices.Clone(ended))
		if len(pts) == 0 || len(pts) > api.MaxDonePoints || (len(ended) <= api.MaxDonePoints && len(pts) != len(ended)) {
			t.Fatalf("%d points for %d completions", len(pts), len(ended))
		}
		last := pts[len(pts)-1]
		if last.Done != len(ended) || !last.At.Equal(slices.MaxFunc(ended, time.Time.Compare)) {
			t.Fatalf("last point %+v, want %d at the latest completion", last, len(ended))
		}
		for i, p := range pts {
			if i > 0 && (p.Done <= pts[i-1].Done || p.At.Before(pts[i-1].At)) {
				t.Fatalf("point %d %+v after %+v", i, p, pts[i-1])
			}
			by := 0
			for _, e := range ended {
				if !e.After(p.At) {
					by++
				}
			}
			// Ties: several tasks may end at p.At; p counts up to one of them.
			if p.Done > by {
				t.Fatalf("point %+v: only %d had completed by then", p, by)
			}
		}
	})
}
