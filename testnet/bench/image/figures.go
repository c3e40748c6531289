package image

import (
	"context"
	"fmt"
	"io/fs"
	"log/slog"
	"math/rand/v2"
	"os"
	osexec "os/exec"
	"path/filepath"
	"slices"
	"syscall"
	"time"

	"github.com/e31network/e31/content"
	cimage "github.com/e31network/e31/content/image"
	"github.com/e31network/e31/exec"
	"github.com/e31network/e31/node/images"
	"github.com/e31network/e31/testnet/bench"
	"github.com/e31network/e31/testnet/imagebuild"
	"github.com/ipfs/go-cid"
	"github.com/libp2p/go-libp2p"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/p2p/transport/tcp"
	"golang.org/x/sys/unix"
)

const mib = 1 << 20

// benchPeer is one node of the bench: a libp2p host on loopback TCP only
// (no relay, no port mapping), a store on disk and an exchange.
type benchPeer struct {
	h      host.Host
	s      *content.Store
	x      *content.Exchange
	closed bool
}

func startBenchPeer(ctx context.Context, dir string, log *slog.Logger) (*benchPeer, error) {
	h, err := libp2p.New(
		libp2p.NoTransports,
		libp2p.Transport(tcp.NewTCPTransport),
		libp2p.ListenAddrStrings("/ip4/127.0.0.1/tcp/0"),
		libp2p.DisableRelay(),
	)
	if err != nil {
		return nil, err
	}
	s, err := content.Open(ctx, dir, content.StoreOptions{Log: log})
	if err != nil {
		_ = h.Close()
		return nil, err
	}
	// Both peers are this process: every peer may fetch every root.
	all := content.AccessFunc(func(peer.ID, cid.Cid) bool { return true })
	x, err := content.NewExchange(ctx, h, s, all, content.ExchangeOptions{Log: log})
	if err != nil {
		_ = s.Close()
		_ = h.Close()
		return nil, err
	}
	return &benchPeer{h: h, s: s, x: x}, nil
}

// close closes the peer; a second call does nothing.
func (p *benchPeer) close() {
	if p.closed {
		return
	}
	p.closed = true
	_ = p.x.Close()
	_ = p.h.Close()
	_ = p.s.Close()
}

// runTool runs a system program for a baseline and returns its wall time.
func runTool(ctx context.Context, name string, args ...string) (time.Duration, error) {
	cmd := osexec.CommandContext(ctx, name, args...)
	t0 := time.Now()
	out, err := cmd.CombinedOutput()
	d := time.Since(t0)
	if err != nil {
		return d, fmt.Errorf("%s: %w\n%.2000s", name, err, out)
	}
	return d, nil
}

// ImportFigures is figure a: importing an image into a store.
type ImportFigures struct {
	Bytes           int64   `json:"bytes"`
	Layers          int     `json:"layers"`
	ImportS         float64 `json:"import_s"`
	ImportMiBps     float64 `json:"import_mib_s"`
	Sha256sumS      float64 `json:"sha256sum_s"`
	Sha256sumMiBps  float64 `json:"sha256sum_mib_s"`
	RatioToBaseline float64 `json:"ratio"` // import rate / sha256sum rate
}

// benchImport imports the layout at layout into a new store at dir and,
// first, hashes the same blob files with the system's sha256sum.
func benchImport(ctx context.Context, layout, dir string, log *slog.Logger) (ImportFigures, *benchPeer, cid.Cid, error) {
	var f ImportFigures
	files, total, err := layoutFiles(layout)
	if err != nil {
		return f, nil, cid.Undef, err
	}
	f.Bytes = total
	base, err := runTool(ctx, "sha256sum", files...)
	if err != nil {
		return f, nil, cid.Undef, err
	}
	p, err := startBenchPeer(ctx, dir, log)
	if err != nil {
		return f, nil, cid.Undef, err
	}
	t0 := time.Now()
	rec, err := cimage.Import(ctx, p.s, cimage.Ref{Transport: cimage.OCI, Path: layout}, cimage.Options{})
	took := time.Since(t0)
	if err != nil {
		p.close()
		return f, nil, cid.Undef, err
	}
	f.ImportS, f.Sha256sumS = took.Seconds(), base.Seconds()
	f.ImportMiBps = float64(total) / mib / f.ImportS
	f.Sha256sumMiBps = float64(total) / mib / f.Sha256sumS
	f.RatioToBaseline = f.ImportMiBps / f.Sha256sumMiBps
	return f, p, rec.CID, nil
}

// ColdFigures is figure b: a provider that holds nothing of the image.
type ColdFigures struct {
	Bytes           int64   `json:"bytes"`
	Method          string  `json:"method"`
	FetchS          float64 `json:"fetch_s"`
	UnpackS         float64 `json:"unpack_s"`
	TotalS          float64 `json:"total_s"`
	TarS            float64 `json:"tar_xzf_s"`
	RatioToBaseline float64 `json:"ratio"` // total / tar
}

// benchColdStart fetches root from sender into a new peer's store, then
// unpacks every layer into an empty layer cache; the baseline is tar -xzf
// of the same layer files, one after another, into empty folders.
func benchColdStart(ctx context.Context, sender *benchPeer, root cid.Cid, layers []benchLayer, dir string, log *slog.Logger) (ColdFigures, error) {
	var f ColdFigures
	for i, l := range layers {
		dst := filepath.Join(dir, "tar", fmt.Sprint(i))
		if err := os.MkdirAll(dst, 0o755); err != nil {
			return f, err
		}
		d, err := runTool(ctx, "tar", "-xzf", l.path, "-C", dst)
		if err != nil {
			return f, err
		}
		f.TarS += d.Seconds()
	}
	if err := os.RemoveAll(filepath.Join(dir, "tar")); err != nil {
		return f, err
	}

	rx, err := startBenchPeer(ctx, filepath.Join(dir, "store"), log)
	if err != nil {
		return f, err
	}
	defer rx.close()
	if err := rx.h.Connect(ctx, peer.AddrInfo{ID: sender.h.ID(), Addrs: sender.h.Addrs()}); err != nil {
		return f, err
	}
	lib, err := images.Open(ctx, rx.s, filepath.Join(dir, "layers"), images.Options{Log: log})
	if err != nil {
		return f, err
	}
	defer lib.Close()
	t0 := time.Now()
	st, err := rx.x.Fetch(ctx, sender.h.ID(), root, content.FetchOptions{Pin: "image bench"})
	if err != nil {
		return f, err
	}
	t1 := time.Now()
	_, release, err := lib.Prepare(ctx, root)
	if err != nil {
		return f, err
	}
	t2 := time.Now()
	release()
	if n := lib.Stats().Unpacks; n != uint64(len(layers)) {
		return f, fmt.Errorf("the cold start unpacked %d layers, want %d", n, len(layers))
	}
	f.Bytes, f.Method = st.BytesFetched, st.Method
	f.FetchS, f.UnpackS, f.TotalS = t1.Sub(t0).Seconds(), t2.Sub(t1).Seconds(), t2.Sub(t0).Seconds()
	f.RatioToBaseline = f.TotalS / f.TarS
	return f, nil
}

// WarmFigures is figure c: a job's start with its layers cached.
type WarmFigures struct {
	Skipped string  `json:"skipped,omitempty"`
	Runs    int     `json:"runs"`
	HostMs  float64 `json:"host_ms"`  // median run of /bin/true on the host's root
	ImageMs float64 `json:"image_ms"` // median Prepare (all hits) + run + release
	AddedMs float64 `json:"added_ms"` // median of the paired differences
	GoalMs  float64 `json:"goal_ms"`
}

// benchWarmStart builds a busybox image, imports and unpacks it once, and
// then runs /bin/true runs times each with and without it, alternating so
// that both see the same load.
func benchWarmStart(ctx context.Context, dir string, runs int, log *slog.Logger) (WarmFigures, error) {
	f := WarmFigures{Runs: runs, GoalMs: 20}
	if os.Geteuid() != 0 {
		f.Skipped = "needs root (runc with cgroup limits, layer ownership)"
		return f, nil
	}
	if m := imagebuild.Missing(); len(m) > 0 {
		f.Skipped = fmt.Sprintf("apt-get install -y %v to build the busybox image", m)
		return f, nil
	}
	mnt, err := os.MkdirTemp("", "e31-bench-mnt-")
	if err != nil {
		return f, err
	}
	defer os.Remove(mnt)
	// The job's root is an unprivileged host uid that must walk to it.
	if err := os.Chmod(mnt, 0o711); err != nil {
		return f, err
	}
	r, err := exec.NewRunner(ctx, exec.RunnerOptions{StateRoot: filepath.Join(dir, "state"), MountRoot: mnt, Log: log})
	if err != nil {
		f.Skipped = err.Error()
		return f, nil
	}
	if err := r.ImageSupport(); err != nil {
		f.Skipped = "image jobs cannot run here: " + err.Error()
		return f, nil
	}
	build := filepath.Join(dir, "build")
	if err := os.MkdirAll(build, 0o755); err != nil {
		return f, err
	}
	b, err := imagebuild.New(ctx, build, "bench")
	if err != nil {
		return f, err
	}
	if err := b.Layer(ctx, imagebuild.BusyboxRoot()); err != nil {
		return f, err
	}
	s, err := content.Open(ctx, filepath.Join(dir, "store"), content.StoreOptions{Log: log})
	if err != nil {
		return f, err
	}
	defer s.Close()
	rec, err := cimage.Import(ctx, s, cimage.Ref{Transport: cimage.OCI, Path: b.Layout(), Tag: "bench"}, cimage.Options{})
	if err != nil {
		return f, err
	}
	lib, err := images.Open(ctx, s, filepath.Join(dir, "layers"), images.Options{Log: log})
	if err != nil {
		return f, err
	}
	defer lib.Close()
	// The first Prepare unpacks; every one after it finds the layers.
	_, release, err := lib.Prepare(ctx, rec.CID)
	if err != nil {
		return f, err
	}
	release()

	spec := func(name string, i int) exec.Spec {
		d := filepath.Join(dir, "runs", fmt.Sprintf("%s-%d", name, i))
		return exec.Spec{
			ID: fmt.Sprintf("bench-%s-%d", name, i), Dir: d, Command: []string{"/bin/true"},
			Output: exec.Mount{Source: filepath.Join(d, "out"), Target: "/out"},
			CPUs:   1, MemoryBytes: 256 << 20, Limit: time.Minute, Grace: 2 * time.Second,
		}
	}
	run := func(s exec.Spec) error {
		res, err := r.Run(ctx, s)
		if err == nil && res.Outcome != exec.Completed {
			err = fmt.Errorf("%s ended %s: %s", s.ID, res.Outcome, res.Reason)
		}
		return err
	}
	var host, img, added []float64
	for i := -2; i < runs; i++ { // two runs of each to warm up
		t0 := time.Now()
		if err := run(spec("host", i+2)); err != nil {
			return f, err
		}
		t1 := time.Now()
		ir, release, err := lib.Prepare(ctx, rec.CID)
		if err != nil {
			return f, err
		}
		s := spec("image", i+2)
		s.Image = ir
		err = run(s)
		release()
		if err != nil {
			return f, err
		}
		t2 := time.Now()
		if i < 0 {
			continue
		}
		host = append(host, bench.Ms(t1.Sub(t0)))
		img = append(img, bench.Ms(t2.Sub(t1)))
		added = append(added, bench.Ms(t2.Sub(t1)-t1.Sub(t0)))
	}
	if st := lib.Stats(); st.Unpacks != 1 {
		return f, fmt.Errorf("warm starts unpacked again: %+v", st)
	}
	f.HostMs, f.ImageMs, f.AddedMs = bench.SpreadOf(host).P50, bench.SpreadOf(img).P50, bench.SpreadOf(added).P50
	return f, os.RemoveAll(filepath.Join(dir, "runs"))
}

// DiskFigures is figure d: two images that share a base.
type DiskFigures struct {
	BaseBytes int64 `json:"base_bytes"` // the shared layers' blobs
	TopBytes  int64 `json:"top_bytes"`  // each image's own layer's blob
	// SumBytes is both images' blobs, the base counted twice; StoreBytes
	// the store's disk use after importing both.
	SumBytes   int64   `json:"sum_bytes"`
	StoreBytes int64   `json:"store_bytes"`
	StoreRatio float64 `json:"store_ratio"` // store / sum
	// UnpackedSumBytes is the disk use of each image's unpacked layers,
	// the base counted twice; CacheBytes the cache's after unpacking both.
	UnpackedSumBytes int64   `json:"unpacked_sum_bytes"`
	CacheBytes       int64   `json:"cache_bytes"`
	CacheRatio       float64 `json:"cache_ratio"` // cache / unpacked sum
	// UnpackedBaseBytes is the base's share of UnpackedSumBytes, once.
	UnpackedBaseBytes int64 `json:"unpacked_base_bytes"`
	// BaseOnce: both the store and the cache are within 5% of the sum
	// less one copy of the base.
	BaseOnce bool `json:"base_once"`
}

// benchDisk imports two images with the same base layers and different
// tops into one store and unpacks both into one cache.
func benchDisk(ctx context.Context, base []benchLayer, tops [2]benchLayer, dir string, log *slog.Logger) (DiskFigures, error) {
	var f DiskFigures
	for _, l := range base {
		f.BaseBytes += l.size
	}
	f.TopBytes = tops[0].size
	f.SumBytes = 2*f.BaseBytes + tops[0].size + tops[1].size
	storeDir := filepath.Join(dir, "store")
	s, err := content.Open(ctx, storeDir, content.StoreOptions{Log: log})
	if err != nil {
		return f, err
	}
	defer func() {
		if s != nil {
			s.Close()
		}
	}()
	lib, err := images.Open(ctx, s, filepath.Join(dir, "layers"), images.Options{Log: log})
	if err != nil {
		return f, err
	}
	defer lib.Close()
	cacheDir := filepath.Join(dir, "layers")
	var unpackedSum, unpackedBase int64
	for i, top := range tops {
		layout := filepath.Join(dir, fmt.Sprintf("image%d", i))
		if err := writeBenchLayout(layout, append(slices.Clone(base), top)); err != nil {
			return f, err
		}
		rec, err := cimage.Import(ctx, s, cimage.Ref{Transport: cimage.OCI, Path: layout}, cimage.Options{})
		if err != nil {
			return f, err
		}
		ir, release, err := lib.Prepare(ctx, rec.CID)
		if err != nil {
			return f, err
		}
		release()
		for j, l := range ir.Layers {
			n, err := diskUsage(filepath.Dir(l))
			if err != nil {
				return f, err
			}
			unpackedSum += n
			if i == 0 && j > 0 { // ir.Layers is top first
				unpackedBase += n
			}
		}
	}
	f.UnpackedSumBytes, f.UnpackedBaseBytes = unpackedSum, unpackedBase
	if f.CacheBytes, err = diskUsage(cacheDir); err != nil {
		return f, err
	}
	// Close first: the store's disk use is what stays once its logs are
	// flushed and trimmed.
	err = s.Close()
	s = nil
	if err != nil {
		return f, err
	}
	if f.StoreBytes, err = diskUsage(storeDir); err != nil {
		return f, err
	}
	f.StoreRatio = float64(f.StoreBytes) / float64(f.SumBytes)
	f.CacheRatio = float64(f.CacheBytes) / float64(f.UnpackedSumBytes)
	within := func(got, want int64) bool { return float64(got) <= 1.05*float64(want) }
	f.BaseOnce = within(f.StoreBytes, f.SumBytes-f.BaseBytes) && within(f.CacheBytes, f.UnpackedSumBytes-unpackedBase)
	return f, nil
}

// diskUsage is the disk blocks under dir, each inode counted once.
func diskUsage(dir string) (int64, error) {
	seen := map[uint64]bool{}
	var total int64
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		var st syscall.Stat_t
		if err := syscall.Lstat(p, &st); err != nil {
			return err
		}
		if !seen[st.Ino] {
			seen[st.Ino] = true
			total += st.Blocks * 512
		}
		return nil
	})
	return total, err
}

// CheckpointFigures is figure e: laying out a checkpoint for a resumed
// run, two ways.
type CheckpointFigures struct {
	Bytes   int64   `json:"bytes"`
	Files   int     `json:"files"`
	ImportS float64 `json:"import_s"` // for scale: the submitter's side
	ExportS float64 `json:"export_s"` // store -> writable checkpoint folder
	// The overlay: lowerdir is an exported copy (ExportS again), upper
	// and work empty.
	MountMs         float64 `json:"overlay_mount_ms"`
	FirstNewWriteMs float64 `json:"overlay_first_write_new_file_ms"`
	// FirstRewriteMs is the first write into an existing checkpoint file:
	// overlayfs copies the whole file up first.
	FirstRewriteMs float64 `json:"overlay_first_write_existing_file_ms"`
	CopiedUpBytes  int64   `json:"overlay_copied_up_bytes"`
	// LowerExportS is the export of the overlay's lower layer, the same
	// work as ExportS, measured again.
	LowerExportS    float64 `json:"lower_export_s"`
	OverlayTotalS   float64 `json:"overlay_total_s"` // ExportS + mount + first rewrite
	RatioToBaseline float64 `json:"ratio"`           // overlay total / export
	Skipped         string  `json:"overlay_skipped,omitempty"`
}

// benchCheckpoint writes a checkpoint of size bytes in files, imports it,
// exports it into a job's checkpoint folder, and mounts an overlay over a
// second export.
func benchCheckpoint(ctx context.Context, size int64, files int, dir string, log *slog.Logger) (CheckpointFigures, error) {
	f := CheckpointFigures{Bytes: size, Files: files}
	src := filepath.Join(dir, "ckpt")
	if err := os.MkdirAll(src, 0o755); err != nil {
		return f, err
	}
	rng := rand.NewChaCha8([32]byte{'e', '3', '1'})
	buf := make([]byte, 4*mib)
	per := size / int64(files)
	for i := range files {
		w, err := os.Create(filepath.Join(src, fmt.Sprintf("shard-%02d.pt", i)))
		if err != nil {
			return f, err
		}
		for left := per; left > 0; left -= int64(len(buf)) {
			b := buf[:min(left, int64(len(buf)))]
			_, _ = rng.Read(b)
			if _, err := w.Write(b); err != nil {
				w.Close()
				return f, err
			}
		}
		if err := w.Close(); err != nil {
			return f, err
		}
	}
	s, err := content.Open(ctx, filepath.Join(dir, "store"), content.StoreOptions{Log: log})
	if err != nil {
		return f, err
	}
	defer s.Close()
	t0 := time.Now()
	root, _, err := s.Import(ctx, src, content.ImportOptions{Pin: "checkpoint"})
	if err != nil {
		return f, err
	}
	f.ImportS = time.Since(t0).Seconds()
	// The provider holds the checkpoint in its store, not as the files
	// the submitter had.
	if err := os.RemoveAll(src); err != nil {
		return f, err
	}

	job := filepath.Join(dir, "job", "ckpt")
	if err := os.MkdirAll(filepath.Dir(job), 0o755); err != nil {
		return f, err
	}
	t0 = time.Now()
	if err := s.Export(ctx, root, job, content.ExportOptions{}); err != nil {
		return f, err
	}
	f.ExportS = time.Since(t0).Seconds()
	if err := os.RemoveAll(filepath.Join(dir, "job")); err != nil {
		return f, err
	}

	lower, upper, work, merged := filepath.Join(dir, "lower"), filepath.Join(dir, "upper"), filepath.Join(dir, "work"), filepath.Join(dir, "merged")
	t0 = time.Now()
	if err := s.Export(ctx, root, lower, content.ExportOptions{}); err != nil {
		return f, err
	}
	f.LowerExportS = time.Since(t0).Seconds()
	for _, d := range []string{upper, work, merged} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return f, err
		}
	}
	t0 = time.Now()
	if err := unix.Mount("overlay", merged, "overlay", 0, "lowerdir="+lower+",upperdir="+upper+",workdir="+work); err != nil {
		f.Skipped = fmt.Sprintf("cannot mount overlayfs here: %v", err)
		return f, nil
	}
	f.MountMs = bench.Ms(time.Since(t0))
	defer func() { _ = unix.Unmount(merged, 0) }()

	page := buf[:4096]
	t0 = time.Now()
	if err := os.WriteFile(filepath.Join(merged, "progress"), page, 0o644); err != nil {
		return f, err
	}
	f.FirstNewWriteMs = bench.Ms(time.Since(t0))
	t0 = time.Now()
	w, err := os.OpenFile(filepath.Join(merged, "shard-00.pt"), os.O_WRONLY, 0)
	if err != nil {
		return f, err
	}
	_, err = w.WriteAt(page, 0)
	if cerr := w.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return f, err
	}
	f.FirstRewriteMs = bench.Ms(time.Since(t0))
	if fi, err := os.Stat(filepath.Join(upper, "shard-00.pt")); err == nil {
		f.CopiedUpBytes = fi.Size()
	}
	// Both designs lay the checkpoint out as files with the same export;
	// the overlay adds its mount and the copy-up of the first file written.
	f.OverlayTotalS = f.ExportS + (f.MountMs+f.FirstRewriteMs)/1000
	f.RatioToBaseline = f.OverlayTotalS / f.ExportS
	return f, nil
}
