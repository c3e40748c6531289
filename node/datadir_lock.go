package node

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// PIDFile, in the data dir, holds the PID of the e31d that runs on it,
// locked (flock) for as long as it runs.
const PIDFile = "e31d.pid"

// DataDirInUseError is returned by New when another e31d runs on the data
// dir.
type DataDirInUseError struct {
	Dir string
	PID int // 0 where the PID file does not say
}

func (e *DataDirInUseError) Error() string {
	if e.PID > 0 {
		return fmt.Sprintf("e31d PID %d already runs on this data dir (%s)", e.PID, e.Dir)
	}
	return fmt.Sprintf("another e31d already runs on this data dir (%s)", e.Dir)
}

// dataDirLock is the lock on a data dir: one daemon at a time opens its
// stores, and a second one is told which process holds them rather than
// meeting a store's own lock error.
type dataDirLock struct {
	f *os.File
}

// lockDataDir takes the data dir's lock and writes this process's PID
// under it.
func lockDataDir(dir string) (*dataDirLock, error) {
	path := filepath.Join(dir, PIDFile)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return nil, fmt.Errorf("data dir lock: %w", err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		defer f.Close()
		if errors.Is(err, unix.EWOULDBLOCK) {
			b, _ := os.ReadFile(path)
			pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
			return nil, &DataDirInUseError{Dir: dir, PID: max(pid, 0)}
		}
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	err = f.Truncate(0)
	if err == nil {
		_, err = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	if err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("write %s: %w", path, err)
	}
	return &dataDirLock{f: f}, nil
}

// Release lets another daemon open the data dir. The PID file stays; only
// its lock counts.
func (l *dataDirLock) Release() error {
	return l.f.Close()
}
