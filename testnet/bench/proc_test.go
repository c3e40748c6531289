package bench

import (
	"testing"
	"time"
)

func TestParseProcStat(t *testing.T) {
	// The command name may hold spaces and parentheses.
	s := "4242 (e31d (x) y) S 1 4242 4242 0 -1 4194560 1000 0 0 0 150 25 300 40 20 0 12 0 100 0 0\n"
	got, err := parseProcStat(s)
	if err != nil {
		t.Fatal(err)
	}
	if got.Self != 1750*time.Millisecond || got.Children != 3400*time.Millisecond {
		t.Fatalf("%+v, want self 1.75s, children 3.4s", got)
	}
	if _, err := parseProcStat("4242 (e31d) S 1 2"); err == nil {
		t.Fatal("a short stat line parsed")
	}
}
