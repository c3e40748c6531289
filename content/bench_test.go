package content

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/network"
)

const benchRawProtocol = "/e31/bench/raw/1"

// BenchmarkStaging measures staging an input of E31_BENCH_MIB MiB (default
// 256) between two nodes on loopback: importing it, and fetching it into a
// fresh persistent store over bitswap and over the bulk path, against a raw
// libp2p stream carrying the same bytes (to io.Discard, and into a file).
// Run it as
//
//	E31_BENCH_MIB=1024 go test ./content -run '^$' -bench Staging -benchtime 1x
//
// and read the summary line it logs for the bulk/raw ratio.
func BenchmarkStaging(b *testing.B) {
	mib := int64(256)
	if v := os.Getenv("E31_BENCH_MIB"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n <= 0 {
			b.Fatalf("E31_BENCH_MIB=%q", v)
		}
		mib = n
	}
	size := mib << 20
	ctx := context.Background()

	// The input: four files, like a job's data set.
	src := filepath.Join(b.TempDir(), "input")
	mkdir(b, src, 0o755)
	var files []string
	for i := range int64(4) {
		p := filepath.Join(src, fmt.Sprintf("part-%d", i))
		writeRandom(b, p, size/4, uint64(i), 0o644)
		files = append(files, p)
	}

	var acc access
	sender := newNode(b, &acc, 0)
	root, _, err := sender.s.Import(ctx, src, ImportOptions{Pin: "input of job B"})
	if err != nil {
		b.Fatal(err)
	}
	// The raw baseline serves the same bytes from the page cache.
	sender.h.SetStreamHandler(benchRawProtocol, func(str network.Stream) {
		defer str.Close()
		for _, p := range files {
			f, err := os.Open(p)
			if err != nil {
				_ = str.Reset()
				return
			}
			_, err = io.Copy(str, f)
			f.Close()
			if err != nil {
				_ = str.Reset()
				return
			}
		}
	})

	// Both ends run in this process, so CPU time (user+system, both
	// ends, setup included) per GiB is reported beside the rate: on a
	// shared machine it varies far less than wall time does.
	rates := map[string]float64{}
	measure := func(name string, run func(b *testing.B, i int) (int64, time.Duration)) {
		b.Run(name, func(b *testing.B) {
			var total int64
			var took time.Duration
			i := 0
			cpu0 := cpuTime(b)
			for b.Loop() {
				n, d := run(b, i)
				total += n
				took += d
				i++
			}
			gib := float64(total) / (1 << 30)
			rate := gib * 1024 / took.Seconds()
			b.ReportMetric(rate, "MiB/s")
			b.ReportMetric((cpuTime(b)-cpu0).Seconds()/gib, "cpu-s/GiB")
			rates[name] = rate
		})
	}

	measure("import", func(b *testing.B, i int) (int64, time.Duration) {
		s := openStore(b, b.TempDir())
		defer s.Close()
		start := time.Now()
		_, n, err := s.Import(ctx, src, ImportOptions{Pin: "input"})
		d := time.Since(start)
		if err != nil {
			b.Fatal(err)
		}
		return n, d
	})

	raw := func(sink func(b *testing.B) (io.Writer, func())) func(*testing.B, int) (int64, time.Duration) {
		return func(b *testing.B, i int) (int64, time.Duration) {
			rx := startNode(b, &access{}, 0, b.TempDir())
			defer rx.close()
			connect(b, rx, sender)
			w, done := sink(b)
			start := time.Now()
			str, err := rx.h.NewStream(ctx, sender.h.ID(), benchRawProtocol)
			if err != nil {
				b.Fatal(err)
			}
			n, err := io.Copy(w, str)
			done()
			d := time.Since(start)
			if err != nil || n != size {
				b.Fatalf("raw copy: %d bytes, %v", n, err)
			}
			return n, d
		}
	}
	measure("raw", raw(func(*testing.B) (io.Writer, func()) { return io.Discard, func() {} }))
	measure("raw-file", raw(func(b *testing.B) (io.Writer, func()) {
		f, err := os.Create(filepath.Join(b.TempDir(), "copy"))
		if err != nil {
			b.Fatal(err)
		}
		return f, func() {
			if err := f.Sync(); err != nil {
				b.Fatal(err)
			}
			f.Close()
		}
	}))

	// receive starts a receiver connected to the sender and allowed its
	// root, in a directory that done removes.
	receive := func(b *testing.B) (rx *node, dir string, done func()) {
		dir = b.TempDir()
		rx = startNode(b, &access{}, 0, dir)
		connect(b, rx, sender)
		acc.allow(rx.h.ID(), root)
		return rx, dir, func() {
			rx.close()
			_ = os.RemoveAll(dir)
		}
	}
	fetch := func(bitswap bool) func(*testing.B, int) (int64, time.Duration) {
		return func(b *testing.B, i int) (int64, time.Duration) {
			rx, _, done := receive(b)
			defer done()
			f := rx.x.Fetch
			if bitswap {
				f = rx.x.FetchBitswap
			}
			st, err := f(ctx, sender.h.ID(), root, FetchOptions{Pin: "input of job B"})
			if err != nil {
				b.Fatal(err)
			}
			if st.BlocksFetched != st.Blocks {
				b.Fatalf("fetched %d of %d blocks", st.BlocksFetched, st.Blocks)
			}
			return st.BytesFetched, st.Duration
		}
	}
	measure("bitswap", fetch(true))
	measure("bulk", fetch(false))
	// What a provider does next with a fetched input, and a submitter
	// with a fetched output: write it out as files.
	measure("export", func(b *testing.B, i int) (int64, time.Duration) {
		rx, dir, done := receive(b)
		defer done()
		st, err := rx.x.Fetch(ctx, sender.h.ID(), root, FetchOptions{Pin: "input of job B"})
		if err != nil {
			b.Fatal(err)
		}
		start := time.Now()
		if err := rx.s.Export(ctx, root, filepath.Join(dir, "out"), ExportOptions{}); err != nil {
			b.Fatal(err)
		}
		return st.Bytes, time.Since(start)
	})

	if len(rates) < 6 {
		return // a -bench filter left some out; no summary
	}
	b.Logf("staging %d MiB: import %.0f MiB/s, raw stream %.0f MiB/s (to file %.0f), bitswap %.0f MiB/s, bulk %.0f MiB/s, export of what bulk fetched %.0f MiB/s; bulk/raw %.2f, bulk/raw-file %.2f",
		mib, rates["import"], rates["raw"], rates["raw-file"], rates["bitswap"], rates["bulk"], rates["export"],
		rates["bulk"]/rates["raw"], rates["bulk"]/rates["raw-file"])
}

// cpuTime is the user and system CPU time of this process so far.
func cpuTime(tb testing.TB) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		tb.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
