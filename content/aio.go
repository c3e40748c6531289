package content

import (
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"unsafe"

	"golang.org/x/sys/unix"
)

// asyncWriter writes to files opened with O_DIRECT through Linux's native
// AIO and waits for each write on an eventfd in the runtime's network
// poller. A plain pwrite of a direct file blocks its thread for as long as
// the disk takes, and the Go runtime leaves that thread its P (one of
// GOMAXPROCS) until sysmon takes it back, which it puts off while another
// P looks idle: on two cores, a receive that hashes and writes at once
// ran on little more than one for the time the disk took. Waiting in the
// poller gives the P back at once. With an eventfd (IOCB_FLAG_RESFD)
// instead of io_getevents, nothing blocks in a system call.
//
// One write is in flight at a time; the caller serialises (packs.mu).
type asyncWriter struct {
	ctx   uintptr  // aio_context_t
	ev    *os.File // eventfd, non-blocking, so read through the poller
	evFd  int      // ev's descriptor (ev.Fd would make it blocking)
	cb    iocb     // the request in flight; on the heap, where it does not move
	cbs   [1]*iocb
	event [1]ioEvent
}

// iocb is struct iocb of linux/aio_abi.h. aio_key and aio_rw_flags swap
// places on big-endian machines; both are zero here.
type iocb struct {
	data      uint64
	key       uint32
	rwFlags   int32
	opcode    uint16
	reqprio   int16
	fildes    uint32
	buf       uint64
	nbytes    uint64
	offset    int64
	reserved2 uint64
	flags     uint32
	resfd     uint32
}

// ioEvent is struct io_event of linux/aio_abi.h.
type ioEvent struct {
	data, obj uint64
	res, res2 int64
}

const (
	iocbCmdPwrite = 1 // IOCB_CMD_PWRITE
	iocbFlagResfd = 1 // IOCB_FLAG_RESFD
)

var _ [64]byte = [unsafe.Sizeof(iocb{})]byte{}

// newAsyncWriter sets up an AIO context for one write at a time. An error
// means the kernel will not do AIO here (no support, a seccomp filter,
// fs.aio-max-nr reached): the caller writes synchronously instead.
func newAsyncWriter() (*asyncWriter, error) {
	w := &asyncWriter{}
	if _, _, errno := unix.Syscall(unix.SYS_IO_SETUP, 1, uintptr(unsafe.Pointer(&w.ctx)), 0); errno != 0 {
		return nil, fmt.Errorf("io_setup: %w", errno)
	}
	fd, err := unix.Eventfd(0, unix.EFD_NONBLOCK|unix.EFD_CLOEXEC)
	if err != nil {
		_, _, _ = unix.Syscall(unix.SYS_IO_DESTROY, w.ctx, 0, 0)
		return nil, fmt.Errorf("eventfd: %w", err)
	}
	w.ev, w.evFd = os.NewFile(uintptr(fd), "aio-eventfd"), fd
	w.cbs[0] = &w.cb
	return w, nil
}

// writeAt writes all of buf to f at off. buf must stay where it is until
// the write ends, as the kernel reads it meanwhile: it is memory the
// caller mapped itself (packs.stage), never moved by the collector.
func (w *asyncWriter) writeAt(f *os.File, buf []byte, off int64) error {
	for len(buf) > 0 {
		n, err := w.write1(f, buf, off)
		if err != nil {
			return err
		}
		if n == 0 {
			return io.ErrShortWrite
		}
		buf, off = buf[n:], off+int64(n)
	}
	return nil
}

func (w *asyncWriter) write1(f *os.File, buf []byte, off int64) (int, error) {
	if w.ctx == 0 {
		return 0, errAsyncClosed
	}
	w.cb = iocb{
		opcode: iocbCmdPwrite,
		fildes: uint32(f.Fd()),
		buf:    uint64(uintptr(unsafe.Pointer(&buf[0]))),
		nbytes: uint64(len(buf)),
		offset: off,
		flags:  iocbFlagResfd,
		resfd:  uint32(w.evFd),
	}
	for {
		n, _, errno := unix.Syscall(unix.SYS_IO_SUBMIT, w.ctx, 1, uintptr(unsafe.Pointer(&w.cbs[0])))
		if errno == unix.EINTR {
			continue
		}
		if errno != 0 {
			return 0, fmt.Errorf("%w: io_submit: %w", errNoAsync, errno)
		}
		if n != 1 {
			return 0, fmt.Errorf("%w: io_submit took %d requests of 1", errNoAsync, n)
		}
		break
	}
	// The write is the kernel's now: wait for its completion to be
	// counted on the eventfd, then collect it, which does not block.
	var cnt [8]byte
	if _, err := io.ReadFull(w.ev, cnt[:]); err != nil {
		// The request may still be in flight: only io_destroy, which
		// waits for it, makes buf safe to reuse.
		w.destroy()
		return 0, fmt.Errorf("wait for write: %w", err)
	}
	for {
		n, _, errno := unix.Syscall6(unix.SYS_IO_GETEVENTS, w.ctx, 1, 1, uintptr(unsafe.Pointer(&w.event[0])), 0, 0)
		if errno == unix.EINTR {
			continue
		}
		if errno != 0 || n != 1 {
			w.destroy()
			return 0, fmt.Errorf("io_getevents: %d events: %w", n, errno)
		}
		break
	}
	runtime.KeepAlive(f)
	res := w.event[0].res
	if res < 0 {
		errno := unix.Errno(-res)
		if errno == unix.EINVAL || errno == unix.EOPNOTSUPP {
			// Refused when it ran rather than when submitted (a file
			// system that takes O_DIRECT but not asynchronously): a
			// synchronous write of the same bytes may still succeed.
			return 0, fmt.Errorf("%w: %w", errNoAsync, errno)
		}
		return 0, errno
	}
	return int(res), nil
}

// destroy waits for any write in flight and frees the context; writes
// after it fail.
func (w *asyncWriter) destroy() {
	if w.ctx != 0 {
		_, _, _ = unix.Syscall(unix.SYS_IO_DESTROY, w.ctx, 0, 0)
		w.ctx = 0
	}
}

// close frees the context and the eventfd.
func (w *asyncWriter) close() error {
	w.destroy()
	return w.ev.Close()
}

var (
	errAsyncClosed = errors.New("asynchronous writer closed")
	// errNoAsync: the kernel refused the request as such (EINVAL,
	// EOPNOTSUPP, EAGAIN, …), so the same write can be made
	// synchronously; doing it again is harmless where part of it was.
	errNoAsync = errors.New("asynchronous write refused")
)
