package statetest_test

import (
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"testing"

	"github.com/e31network/e31/node/state"
	"github.com/e31network/e31/node/state/statetest"
)

// store is what the roles consume of state.Store (node/provider's and
// node/submitter's Records together).
type store interface {
	Put(prefix, id string, v any) error
	Get(prefix, id string, v any) (bool, error)
	Each(prefix string, fn func(b []byte) error) error
	Delete(prefix, id string) error
}

var (
	_ store = (*state.Store)(nil)
	_ store = (*statetest.Records)(nil)
)

type record struct {
	ID string `json:"id"`
	N  int    `json:"n"`
}

// script runs the same writes and reads on s and returns what it read, so
// that the fake can be held to the real store.
func script(t *testing.T, s store) []string {
	t.Helper()
	var out []string
	put := func(prefix, id string, n int) {
		if err := s.Put(prefix, id, record{ID: id, N: n}); err != nil {
			t.Fatal(err)
		}
	}
	for _, id := range []string{"b", "a", "c", "a0"} {
		put(state.PrefixJob, id, 1)
	}
	put(state.PrefixLease, "a", 1)
	put(state.PrefixJob, "b", 2) // rewritten: the last version counts
	if err := s.Delete(state.PrefixJob, "c"); err != nil {
		t.Fatal(err)
	}
	if err := s.Delete(state.PrefixJob, "never"); err != nil {
		t.Fatal(err)
	}
	err := s.Each(state.PrefixJob, func(b []byte) error {
		out = append(out, "each "+string(b))
		// A write from inside Each neither deadlocks nor shows in this pass.
		return s.Put(state.PrefixJob, "z", record{ID: "z"})
	})
	if err != nil {
		t.Fatal(err)
	}
	stop := errors.New("stop")
	if err := s.Each(state.PrefixLease, func([]byte) error { return stop }); !errors.Is(err, stop) {
		t.Fatalf("Each returned %v, want fn's error", err)
	}
	for _, id := range []string{"b", "c", "z"} {
		var r record
		ok, err := s.Get(state.PrefixJob, id, &r)
		out = append(out, fmt.Sprintf("get %s: %t %v %+v", id, ok, err, r))
	}
	return out
}

// The fake answers as the Badger store does, write for write.
func TestRecordsActLikeTheStore(t *testing.T) {
	disk, err := state.Open(t.TempDir(), slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer disk.Close()
	want := script(t, disk)
	got := script(t, &statetest.Records{})
	if !slices.Equal(got, want) {
		t.Fatalf("fake read\n%q\nthe store read\n%q", got, want)
	}
}

// While FailPuts is set, Put stores nothing and says why; cleared, it
// stores again.
func TestFailPuts(t *testing.T) {
	var r statetest.Records
	full := errors.New("disk full")
	r.FailPuts(full)
	if err := r.Put(state.PrefixJob, "a", record{ID: "a"}); !errors.Is(err, full) {
		t.Fatalf("Put returned %v, want %v", err, full)
	}
	if ok, _ := r.Get(state.PrefixJob, "a", &record{}); ok {
		t.Fatal("a failed Put stored its record")
	}
	r.FailPuts(nil)
	if err := r.Put(state.PrefixJob, "a", record{ID: "a"}); err != nil {
		t.Fatal(err)
	}
}

// Concurrent writers and readers keep every record whole (run with -race).
func TestRecordsConcurrentUse(t *testing.T) {
	var r statetest.Records
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			for i := range 100 {
				id := fmt.Sprintf("%d-%d", w, i)
				if err := r.Put(state.PrefixJob, id, record{ID: id, N: i}); err != nil {
					t.Error(err)
				}
				if i%10 == 0 {
					if err := r.Each(state.PrefixJob, func([]byte) error { return nil }); err != nil {
						t.Error(err)
					}
				}
				if i%3 == 0 {
					if err := r.Delete(state.PrefixJob, id); err != nil {
						t.Error(err)
					}
				}
			}
		})
	}
	wg.Wait()
	n := 0
	if err := r.Each(state.PrefixJob, func([]byte) error { n++; return nil }); err != nil {
		t.Fatal(err)
	}
	if want := 8 * (100 - 34); n != want {
		t.Fatalf("%d records, want %d", n, want)
	}
}
