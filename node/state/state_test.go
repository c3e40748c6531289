package state

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"runtime"
	"strings"
	"testing"

	"github.com/dgraph-io/badger/v4"
	"github.com/dgraph-io/badger/v4/options"
)

type record struct {
	ID   string `json:"id"`
	Body string `json:"body"`
}

func open(t testing.TB, dir string) *Store {
	t.Helper()
	s, err := Open(dir, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// What was written is there after the store is closed and opened again,
// including records written after many memtables were flushed, rewritten
// records at their last version, and records of the largest size a job
// record can take.
func TestRecordsSurviveReopen(t *testing.T) {
	dir := t.TempDir()
	s := open(t, dir)
	big := strings.Repeat("x", 100<<10) // above the value threshold: in the value log
	const n = 1500
	for round := range 2 {
		for i := range n {
			id := fmt.Sprintf("j%05d", i)
			if err := s.Put(PrefixJob, id, record{ID: id, Body: fmt.Sprintf("round %d %s", round, strings.Repeat("y", 1500))}); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := s.Put(PrefixLease, "big", record{ID: "big", Body: big}); err != nil {
		t.Fatal(err)
	}
	if err := s.Delete(PrefixJob, "j00007"); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	s = open(t, dir)
	defer s.Close()
	var got []record
	err := s.Each(PrefixJob, func(b []byte) error {
		var r record
		if err := json.Unmarshal(b, &r); err != nil {
			return err
		}
		got = append(got, r)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != n-1 {
		t.Fatalf("%d job records after reopening, want %d", len(got), n-1)
	}
	for i, r := range got {
		if i > 0 && got[i-1].ID >= r.ID {
			t.Fatalf("records out of key order: %s before %s", got[i-1].ID, r.ID)
		}
		if r.ID == "j00007" {
			t.Fatal("a deleted record came back")
		}
		if !strings.HasPrefix(r.Body, "round 1 ") {
			t.Fatalf("record %s is an old version: %.10q", r.ID, r.Body)
		}
	}
	var b record
	if ok, err := s.Get(PrefixLease, "big", &b); err != nil || !ok || b.Body != big {
		t.Fatalf("large record: ok %v err %v, %d bytes", ok, err, len(b.Body))
	}
	if ok, err := s.Get(PrefixLease, "j00001", &b); err != nil || ok {
		t.Fatalf("a job's ID under the lease prefix: ok %v err %v", ok, err)
	}
}

// BenchmarkRecordsHeap writes job records as a busy submitter does (each
// written five times over its life) and reports the Go heap in use after
// them, with the store open: what the store keeps resident however many
// jobs went through.
func BenchmarkRecordsHeap(b *testing.B) {
	for _, jobs := range []int{2000} {
		b.Run(fmt.Sprintf("jobs=%d", jobs), func(b *testing.B) {
			var heap uint64
			for b.Loop() {
				s := open(b, b.TempDir())
				body := strings.Repeat("y", 1500)
				for i := range jobs {
					for step := range 5 {
						if err := s.Put(PrefixJob, fmt.Sprintf("j%06d", i), record{ID: fmt.Sprint(step), Body: body}); err != nil {
							b.Fatal(err)
						}
					}
				}
				runtime.GC()
				var m runtime.MemStats
				runtime.ReadMemStats(&m)
				heap = m.HeapInuse
				s.Close()
			}
			b.ReportMetric(float64(heap)/(1<<20), "heap-MiB")
		})
	}
}

// A store written with the sizes of earlier versions (compressed tables, a
// block cache, 4 MiB memtables) opens with today's and reads back every
// record: the tables keep their own compression.
func TestOpensStoreOfEarlierSizes(t *testing.T) {
	dir := t.TempDir()
	db, err := badger.Open(badger.DefaultOptions(dir).WithLogger(nil).WithMemTableSize(4 << 20).
		WithValueThreshold(64 << 10).WithBlockCacheSize(4 << 20).WithIndexCacheSize(2 << 20).WithCompression(options.Snappy))
	if err != nil {
		t.Fatal(err)
	}
	old := &Store{db: db}
	const n = 4000
	for i := range n {
		id := fmt.Sprintf("l%05d", i)
		if err := old.Put(PrefixLease, id, record{ID: id, Body: strings.Repeat("z", 1000)}); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.Flatten(1); err != nil { // into compressed tables on disk
		t.Fatal(err)
	}
	if err := old.Close(); err != nil {
		t.Fatal(err)
	}
	s := open(t, dir)
	defer s.Close()
	count := 0
	if err := s.Each(PrefixLease, func([]byte) error { count++; return nil }); err != nil || count != n {
		t.Fatalf("%d records read back, want %d (err %v)", count, n, err)
	}
	var r record
	if ok, err := s.Get(PrefixLease, "l01234", &r); !ok || err != nil || r.ID != "l01234" {
		t.Fatalf("get: %v %v %+v", ok, err, r.ID)
	}
}
