package joblog_test

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"github.com/e31network/e31/node/joblog"
	"github.com/e31network/e31/node/wire"
)

func TestReadTail(t *testing.T) {
	log := []byte("one\ntwo\nthree\nfour\n")
	for _, tc := range []struct {
		lines int
		want  string
	}{
		{1, "four\n"},
		{2, "three\nfour\n"},
		{4, "one\ntwo\nthree\nfour\n"},
		{9, "one\ntwo\nthree\nfour\n"},
	} {
		rep, err := joblog.Read(bytes.NewReader(log), int64(len(log)), wire.LogsRequest{TailLines: tc.lines}, 1<<10)
		if err != nil {
			t.Fatal(err)
		}
		if string(rep.Data) != tc.want || rep.Dropped {
			t.Errorf("tail %d = %q (dropped %v), want %q", tc.lines, rep.Data, rep.Dropped, tc.want)
		}
	}
	partial := []byte("a\nb\nunfinished")
	rep, _ := joblog.Read(bytes.NewReader(partial), int64(len(partial)), wire.LogsRequest{TailLines: 2}, 1<<10)
	if string(rep.Data) != "b\nunfinished" {
		t.Errorf("tail of a log without a final newline = %q", rep.Data)
	}
}

func TestReadPlaces(t *testing.T) {
	log := []byte("0123456789abcdefghij")
	for _, tc := range []struct {
		name        string
		offset      int64
		after       string
		wantOffset  int64
		wantDropped bool
	}{
		{"from the start", 0, "", 0, false},
		{"anchor where it was", 10, "789", 10, false},
		{"anchor moved to the front", 25, "cde", 15, false},
		{"anchor gone", 25, "xyz", 0, true},
		{"no anchor past the end", 30, "", 0, true},
		{"no anchor inside", 4, "", 4, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req := wire.LogsRequest{Offset: tc.offset, After: []byte(tc.after)}
			rep, err := joblog.Read(bytes.NewReader(log), int64(len(log)), req, 4)
			if err != nil {
				t.Fatal(err)
			}
			if rep.Offset != tc.wantOffset || rep.Dropped != tc.wantDropped {
				t.Fatalf("placed at %d (dropped %v), want %d (dropped %v)", rep.Offset, rep.Dropped, tc.wantOffset, tc.wantDropped)
			}
			if want := log[tc.wantOffset:min(tc.wantOffset+4, int64(len(log)))]; !bytes.Equal(rep.Data, want) {
				t.Fatalf("data %q, want %q", rep.Data, want)
			}
			if err := wire.CheckLogsReply(rep); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// trimmedLog behaves as the sandbox's log file does: past twice its cap, it
// keeps its last cap bytes.
type trimmedLog struct {
	cap int
	b   []byte
}

func (l *trimmedLog) write(p []byte) {
	l.b = append(l.b, p...)
	if len(l.b) > 2*l.cap {
		l.b = append([]byte(nil), l.b[len(l.b)-l.cap:]...)
	}
}

// TestFollowThroughTrims follows a log being trimmed: a reader that keeps
// up sees every byte in order; one that falls further behind than the cap
// sees the marker where bytes went missing, and nothing twice.
func TestFollowThroughTrims(t *testing.T) {
	for _, tc := range []struct {
		name      string
		readEvery int // lines written between two reads
		wantGap   bool
	}{
		{"keeps up", 3, false},
		{"falls behind", 200, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			log := &trimmedLog{cap: 1024}
			var wrote, got bytes.Buffer
			var c joblog.Cursor
			gaps := 0
			read := func() {
				for {
					rep, err := joblog.Read(bytes.NewReader(log.b), int64(len(log.b)), c.Request("l", "j", wire.StreamStdout, 0, 0), 100)
					if err != nil {
						t.Fatal(err)
					}
					if rep.Dropped {
						gaps++
					}
					got.Write(rep.Data)
					c.Advance(rep)
					if c.Offset >= rep.Size {
						return
					}
				}
			}
			for i := range 2000 {
				line := fmt.Sprintf("line %05d\n", i)
				wrote.WriteString(line)
				log.write([]byte(line))
				if i%tc.readEvery == 0 {
					read()
				}
			}
			read()
			if !tc.wantGap {
				if gaps != 0 || got.String() != wrote.String() {
					t.Fatalf("a reader that kept up saw %d gaps and %d of %d bytes", gaps, got.Len(), wrote.Len())
				}
				return
			}
			if gaps == 0 {
				t.Fatal("a reader that fell behind saw no gap")
			}
			// Every line it saw is whole, in order, and seen once.
			last := -1
			for _, l := range strings.Split(strings.TrimSuffix(got.String(), "\n"), "\n") {
				var n int
				if _, err := fmt.Sscanf(l, "line %05d", &n); err != nil {
					continue // a line cut by a gap
				}
				if n <= last {
					t.Fatalf("line %d after line %d", n, last)
				}
				last = n
			}
			if last != 1999 {
				t.Fatalf("last line seen %d, want 1999", last)
			}
		})
	}
}
