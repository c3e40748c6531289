package main

import (
	"bufio"
	"context"
	"io"
	"os"
	"runtime/debug"
	"strconv"
	"strings"
	"time"

	"github.com/e31network/e31/node/task"
	"golang.org/x/sys/unix"
)

// returnMemoryEvery is how often the daemon collects and hands the heap
// pages it no longer uses back to the system. Without it a daemon that goes
// quiet after a burst of jobs keeps the burst's garbage resident: with
// little allocation no collection is due until the runtime's forced one
// (every two minutes), and freed pages go back only slowly after that. A
// contributor's daemon shares the machine with the jobs it hosts, so what
// it does not use it gives back within this period. The cost is one
// collection of a heap of tens of MiB: a few milliseconds of CPU each time,
// well under a thousandth of a core. Measured with go run ./testnet bench
// --only rss (2,200 jobs, the submitter at rest): every 30s, 24 MiB
// anonymous of which 5 MiB freed heap not yet returned.
const returnMemoryEvery = 10 * time.Second

// returnMemory runs until ctx ends.
func returnMemory(ctx context.Context) {
	task.Every(ctx, returnMemoryEvery, func(time.Time) {
		debug.FreeOSMemory()
		_ = pageOutTables() // a hint: nothing to do if it fails
	})
}

// pageOutTables asks the kernel to reclaim the pages of the stores'
// table files (Badger's *.sst, written and read through shared mappings)
// from this process. Badger writes each new table through its mapping, so
// after a burst of jobs every table written stays resident in the daemon,
// though nothing reads most of it again; the tables are on disk, and a
// later read faults the page back in. MADV_PAGEOUT is a hint that never
// loses data, whatever the range holds: a table unmapped by a compaction
// after /proc/self/maps was read, and the range reused by another mapping,
// is paged out, not cleared (where MADV_DONTNEED would zero a private
// mapping's pages). A kernel without it (before Linux 5.4) ignores it.
// Measured with go run ./testnet bench --only rss: 7.8 MiB of the
// submitter's resident memory after 2,200 jobs.
func pageOutTables() error {
	f, err := os.Open("/proc/self/maps")
	if err != nil {
		return err
	}
	defer f.Close()
	return sharedMappings(f, ".sst", func(start, end uint64) {
		_, _, _ = unix.Syscall(unix.SYS_MADVISE, uintptr(start), uintptr(end-start), unix.MADV_PAGEOUT)
	})
}

// sharedMappings calls fn for every shared mapping in maps (the format of
// /proc/PID/maps) of a file whose name ends in suffix.
func sharedMappings(maps io.Reader, suffix string, fn func(start, end uint64)) error {
	sc := bufio.NewScanner(maps)
	for sc.Scan() {
		// start-end perms offset dev inode path
		fields := strings.Fields(sc.Text())
		if len(fields) < 6 || len(fields[1]) < 4 || fields[1][3] != 's' || !strings.HasSuffix(fields[5], suffix) {
			continue
		}
		lo, hi, ok := strings.Cut(fields[0], "-")
		if !ok {
			continue
		}
		start, err1 := strconv.ParseUint(lo, 16, 64)
		end, err2 := strconv.ParseUint(hi, 16, 64)
		if err1 != nil || err2 != nil || end <= start {
			continue
		}
		fn(start, end)
	}
	return sc.Err()
}
