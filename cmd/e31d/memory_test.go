package main

import (
	"strconv"
	"strings"
	"testing"
)

// Only shared mappings of table files are paged out: a private mapping's
// pages may hold changes that exist nowhere else.
func TestSharedMappingsPicksSharedTables(t *testing.T) {
	maps := `00400000-01000000 r-xp 00000000 fd:00 123 /usr/bin/e31d
7f0000000000-7f0000100000 rw-s 00000000 fd:00 456 /data/state/000062.sst
7f0000100000-7f0000200000 rw-p 00000000 fd:00 457 /data/state/000063.sst
7f0000200000-7f0000300000 r--s 00000000 fd:00 458 /data/ledger/000006.sst
7f0000300000-7f0000400000 rw-s 00000000 fd:00 459 /data/state/00035.mem
7f0000400000-7f0000500000 rw-p 00000000 00:00 0
`
	var got []string
	err := sharedMappings(strings.NewReader(maps), ".sst", func(start, end uint64) {
		got = append(got, strconv.FormatUint(start, 16)+"-"+strconv.FormatUint(end, 16))
	})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"7f0000000000-7f0000100000", "7f0000200000-7f0000300000"}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("picked %v, want %v", got, want)
	}
}
