package content

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"golang.org/x/sys/unix"
)

const (
	// packMinBlock is the smallest block kept in a pack file. Smaller
	// blocks (dag-pb nodes, the tail leaf of a file) stay in Badger,
	// where a few bytes of index per block would be out of proportion.
	packMinBlock = 32 << 10
	// packFileSize is the size at which a pack is closed and the next one
	// begun: one fsync per pack when it is full, and GC can delete a
	// whole pack once none of its blocks is live.
	packFileSize = 256 << 20
	// packDir is where the packs live, under the store's directory.
	packDir = "packs"
	// packExt ends every pack file's name; the rest is its number.
	packExt = ".pack"
	// packReserve is how far ahead of the writes a pack's space is
	// allocated. On ext4 a write into allocated space cost a quarter of
	// the CPU of one that extends the file (0.1 s against 0.4 s of
	// system time a GiB here), since blocks are then not allocated page
	// by page.
	packReserve = 64 << 20
)

// packLoc says where a packed block's bytes are.
type packLoc struct {
	pack uint32
	off  int64
}

// sizeRecordLen is the length of a size record of a packed block: size,
// pack number, offset. A block in Badger has a 4-byte record (size only).
const sizeRecordLen = 4 + 4 + 8

func encodeSizeRecord(size int, loc *packLoc) []byte {
	if loc == nil {
		return binary.BigEndian.AppendUint32(nil, uint32(size))
	}
	b := make([]byte, 0, sizeRecordLen)
	b = binary.BigEndian.AppendUint32(b, uint32(size))
	b = binary.BigEndian.AppendUint32(b, loc.pack)
	return binary.BigEndian.AppendUint64(b, uint64(loc.off))
}

// decodeSizeRecord returns the size of a block and, for a packed block,
// where it is.
func decodeSizeRecord(v []byte) (int, *packLoc, error) {
	switch len(v) {
	case 4:
		return int(binary.BigEndian.Uint32(v)), nil, nil
	case sizeRecordLen:
		off := binary.BigEndian.Uint64(v[8:])
		if off > 1<<62 {
			return 0, nil, fmt.Errorf("%w: size record with offset %d", ErrInvalidData, off)
		}
		return int(binary.BigEndian.Uint32(v)), &packLoc{pack: binary.BigEndian.Uint32(v[4:]), off: int64(off)}, nil
	}
	return 0, nil, fmt.Errorf("%w: size record of %d bytes", ErrInvalidData, len(v))
}

// packs holds large blocks in append-only files beside Badger. Writes go
// into space allocated ahead of them and, for blocks received from peers,
// bypass the page cache (O_DIRECT where the file system allows it). Measured here, Badger's value log cost
// about 1 s of CPU a GiB received (it copies each value into its own
// buffer, then into a memory map that faults on every new page), a
// buffered write into a file 0.1 to 1.1 s depending on how the kernel
// came by its page-cache pages, and a direct write 0.1 s, steadily.
// Imported blocks are written through the page cache all the same: a node
// imports what it is about to serve, and serving it from disk instead of
// from memory made a fetch right after an import wait on the disk. Direct
// writes go through Linux AIO where the kernel allows (asyncWriter), so
// that waiting for the disk does not take a P from hashing and the network.
//
// A block starts at a multiple of packAlign, as direct I/O requires; the
// padding costs nothing for the importer's 1 MiB leaves and under 12%
// for the smallest packed block.
//
// A pack's bytes are made durable (sync) before any size record that
// points into them is written to Badger, so a record that survives a crash
// always names bytes that survived it too. A crash can at worst leave
// bytes in a pack that nothing names; they are dropped when GC deletes
// the pack.
type packs struct {
	dir string // immutable

	mu     sync.Mutex          // guards the fields below
	files  map[uint32]*os.File // for reading, through the page cache
	cur    *os.File            // for appending to the current pack, direct; nil until the first append
	curBuf *os.File            // for appending to the current pack through the page cache
	curN   uint32
	curAt  int64 // where the next block goes in cur
	curEnd int64 // space allocated in cur
	next   uint32
	dirty  bool   // cur has writes not yet synced
	stage  []byte // page-aligned, packStage bytes; blocks are gathered here and written together
	closed bool   // close was called: no pack is opened again
	// direct: cur was opened with O_DIRECT. aio writes to it, once made
	// (nil where the kernel would not, noAIO then set).
	direct bool
	aio    *asyncWriter
	noAIO  bool

	// gen counts the calls of free, each counted before it frees
	// anything: a reader that took a block's place in a pack before a free
	// cannot tell a hole punched since from the block's bytes, so it reads
	// gen before taking the place and again after reading (generation).
	gen atomic.Uint64
}

// generation is the number of frees begun so far. Bytes read from a pack
// are the block's if the generation read after the read is the one read
// before the block's place was looked up.
func (p *packs) generation() uint64 {
	if p == nil {
		return 0
	}
	return p.gen.Load()
}

const (
	// packAlign is the alignment of blocks in a pack: the page size,
	// which satisfies direct I/O on any device with sectors up to 4 KiB.
	packAlign = 4096
	// packStage is the size of the buffer blocks are gathered in before
	// a write: at least the largest block, rounded up.
	packStage = 4 << 20
)

func alignUp(n int64) int64 { return (n + packAlign - 1) &^ (packAlign - 1) }

func openPacks(dir string) (*packs, error) {
	d := filepath.Join(dir, packDir)
	if err := os.MkdirAll(d, 0o700); err != nil {
		return nil, fmt.Errorf("open packs: %w", err)
	}
	ents, err := os.ReadDir(d)
	if err != nil {
		return nil, fmt.Errorf("open packs: %w", err)
	}
	p := &packs{dir: d, files: map[uint32]*os.File{}}
	for _, e := range ents {
		if n, ok := packNumber(e.Name()); ok && n >= p.next {
			p.next = n + 1
		}
	}
	return p, nil
}

func packNumber(name string) (uint32, bool) {
	s, ok := strings.CutSuffix(name, packExt)
	if !ok {
		return 0, false
	}
	n, err := strconv.ParseUint(s, 10, 32)
	return uint32(n), err == nil
}

func (p *packs) path(n uint32) string {
	return filepath.Join(p.dir, strconv.FormatUint(uint64(n), 10)+packExt)
}

// append writes blocks at the end of the current pack and returns where
// each went, leaving them in the page cache if cache is set. The bytes are
// not durable until sync.
func (p *packs) append(blocks [][]byte, cache bool) ([]packLoc, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.stage == nil {
		b, err := unix.Mmap(-1, 0, packStage, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_ANON|unix.MAP_PRIVATE)
		if err != nil {
			return nil, fmt.Errorf("pack buffer: %w", err)
		}
		p.stage = b
	}
	locs := make([]packLoc, len(blocks))
	staged := int64(0)
	for i, data := range blocks {
		n := alignUp(int64(len(data)))
		if n > packStage {
			return nil, fmt.Errorf("%w: block of %d bytes", ErrUnsupported, len(data))
		}
		if p.cur != nil && p.curAt+staged+n > packFileSize {
			if err := p.writeLocked(staged, cache); err != nil {
				return nil, err
			}
			staged = 0
			// Sealed packs are synced here, so sync only ever needs
			// the current one.
			if err := p.syncLocked(); err != nil {
				return nil, err
			}
			if err := p.sealLocked(); err != nil {
				return nil, fmt.Errorf("seal pack %d: %w", p.curN, err)
			}
		}
		if p.cur == nil {
			if err := p.beginLocked(); err != nil {
				return nil, err
			}
		}
		if staged+n > packStage {
			if err := p.writeLocked(staged, cache); err != nil {
				return nil, err
			}
			staged = 0
		}
		copy(p.stage[staged:], data)
		clear(p.stage[staged+int64(len(data)) : staged+n])
		locs[i] = packLoc{pack: p.curN, off: p.curAt + staged}
		staged += n
	}
	if err := p.writeLocked(staged, cache); err != nil {
		return nil, err
	}
	return locs, nil
}

// writeLocked writes the first n bytes of the stage at curAt.
func (p *packs) writeLocked(n int64, cache bool) error {
	if n == 0 {
		return nil
	}
	if end := p.curAt + n; end > p.curEnd {
		grow := max(end, p.curEnd+packReserve) - p.curEnd
		err := unix.Fallocate(int(p.cur.Fd()), 0, p.curEnd, grow)
		if err == nil {
			p.curEnd += grow
		} else if !errors.Is(err, unix.EOPNOTSUPP) {
			return fmt.Errorf("grow pack %d: %w", p.curN, err)
		}
	}
	f := p.cur
	if cache {
		f = p.curBuf
	}
	if err := p.writeStage(f, n, cache); err != nil {
		// The tail may hold part of the stage; nothing names it, and
		// the next write goes over it.
		return fmt.Errorf("write pack %d: %w", p.curN, err)
	}
	if cache {
		// Start writing back now, so that the sync at the end of the
		// import has little left to wait for.
		_ = unix.SyncFileRange(int(f.Fd()), p.curAt, n, unix.SYNC_FILE_RANGE_WRITE)
	}
	p.curAt += n
	p.dirty = true
	return nil
}

// writeStage writes the first n bytes of the stage at curAt: to a direct
// pack asynchronously where the kernel allows (asyncWriter), else with
// pwrite.
func (p *packs) writeStage(f *os.File, n int64, cache bool) error {
	if !cache && p.direct && !p.noAIO {
		if p.aio == nil {
			if w, err := newAsyncWriter(); err == nil {
				p.aio = w
			} else {
				p.noAIO = true
			}
		}
		if p.aio != nil {
			err := p.aio.writeAt(f, p.stage[:n], p.curAt)
			if !errors.Is(err, errNoAsync) && !errors.Is(err, errAsyncClosed) {
				return err
			}
			// Refused, or the writer is broken: this write and every
			// later one go through pwrite.
			_ = p.aio.close()
			p.aio, p.noAIO = nil, true
		}
	}
	_, err := f.WriteAt(p.stage[:n], p.curAt)
	return err
}

func (p *packs) beginLocked() error {
	n := p.next
	direct := true
	f, err := os.OpenFile(p.path(n), os.O_WRONLY|os.O_CREATE|os.O_EXCL|unix.O_DIRECT, 0o600)
	if errors.Is(err, unix.EINVAL) {
		// A file system without direct I/O (tmpfs): the page cache it is.
		direct = false
		f, err = os.OpenFile(p.path(n), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	}
	if err != nil {
		return fmt.Errorf("create pack: %w", err)
	}
	fb, err := os.OpenFile(p.path(n), os.O_WRONLY, 0)
	if err != nil {
		_ = f.Close()
		return fmt.Errorf("open pack: %w", err)
	}
	// The new name must outlive a crash as surely as the bytes in it.
	if err := syncDir(p.dir); err != nil {
		_ = f.Close()
		_ = fb.Close()
		return err
	}
	p.next++
	p.curBuf = fb
	p.cur, p.curN, p.curAt, p.curEnd, p.dirty, p.direct = f, n, 0, 0, false, direct
	return nil
}

// sealLocked ends the current pack, which is synced, giving back the space
// allocated beyond its last block.
func (p *packs) sealLocked() error {
	if p.cur == nil {
		return nil
	}
	var err error
	if p.curEnd > p.curAt {
		err = p.cur.Truncate(p.curAt)
	}
	err = errors.Join(err, p.cur.Close(), p.curBuf.Close())
	p.cur, p.curBuf = nil, nil
	return err
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("sync %s: %w", dir, err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("sync %s: %w", dir, err)
	}
	return nil
}

// sync makes every block appended so far durable.
func (p *packs) sync() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.syncLocked()
}

func (p *packs) syncLocked() error {
	if p.cur == nil || !p.dirty {
		return nil
	}
	if err := unix.Fdatasync(int(p.cur.Fd())); err != nil {
		return fmt.Errorf("sync pack %d: %w", p.curN, err)
	}
	p.dirty = false
	return nil
}

// file returns the open pack n.
func (p *packs) file(n uint32) (*os.File, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil, ErrClosed
	}
	if f, ok := p.files[n]; ok {
		return f, nil
	}
	f, err := os.Open(p.path(n))
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("%w: pack %d is gone", ErrInvalidData, n)
	}
	if err != nil {
		return nil, fmt.Errorf("open pack %d: %w", n, err)
	}
	p.files[n] = f
	return f, nil
}

// read fills buf with the bytes at loc. A pack cut short (a disk that lost
// its tail) reads as ErrInvalidData, like a block whose bytes are wrong.
func (p *packs) read(loc packLoc, buf []byte) error {
	f, err := p.file(loc.pack)
	if err != nil {
		return err
	}
	_, err = f.ReadAt(buf, loc.off)
	if errors.Is(err, io.EOF) {
		return fmt.Errorf("%w: pack %d ends before offset %d+%d", ErrInvalidData, loc.pack, loc.off, len(buf))
	}
	if err != nil {
		return fmt.Errorf("read pack %d: %w", loc.pack, err)
	}
	return nil
}

// free gives the space of dead blocks back to the file system (a hole
// punched in the pack) and deletes every pack, other than the one being
// appended to, that holds no live block. GC calls it with no writer
// running, after the size records of the dead blocks are deleted and
// synced.
func (p *packs) free(dead map[uint32][]packSpan, live map[uint32]bool) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.gen.Add(1)
	ents, err := os.ReadDir(p.dir)
	if err != nil {
		return fmt.Errorf("free packs: %w", err)
	}
	var errs []error
	for _, e := range ents {
		n, ok := packNumber(e.Name())
		if !ok || live[n] || (p.cur != nil && n == p.curN) {
			continue
		}
		if f, ok := p.files[n]; ok {
			_ = f.Close()
			delete(p.files, n)
		}
		if err := os.Remove(p.path(n)); err != nil {
			errs = append(errs, err)
		}
	}
	for n, spans := range dead {
		if !live[n] && !(p.cur != nil && n == p.curN) {
			continue // deleted whole above
		}
		f, err := os.OpenFile(p.path(n), os.O_WRONLY, 0)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		for _, s := range spans {
			err := unix.Fallocate(int(f.Fd()), unix.FALLOC_FL_PUNCH_HOLE|unix.FALLOC_FL_KEEP_SIZE, s.off, s.n)
			if errors.Is(err, unix.EOPNOTSUPP) {
				break // this file system keeps the space until the pack dies
			}
			if err != nil {
				errs = append(errs, fmt.Errorf("punch pack %d: %w", n, err))
				break
			}
		}
		errs = append(errs, f.Close())
	}
	return errors.Join(errs...)
}

// packSpan is a range of bytes in a pack.
type packSpan struct{ off, n int64 }

func (p *packs) close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.closed = true
	errs := []error{p.syncLocked(), p.sealLocked()}
	for n, f := range p.files {
		errs = append(errs, f.Close())
		delete(p.files, n)
	}
	if p.aio != nil {
		// Before the stage goes: io_destroy waits for any write from it.
		errs = append(errs, p.aio.close())
		p.aio = nil
	}
	if p.stage != nil {
		errs = append(errs, unix.Munmap(p.stage))
		p.stage = nil
	}
	return errors.Join(errs...)
}
