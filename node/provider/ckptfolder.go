package provider

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"syscall"
	"time"
)

// A job writes its checkpoint folder while the provider takes it, and a
// program written the ordinary way (torch.save straight onto its file) may
// be halfway through a file at that instant. A capture taken while the job
// runs is therefore kept only if the folder did not change while it was
// imported, and, first, had not changed for checkpointSettle: a file being
// written moves its modification time with every write, so a writer caught
// mid-file is seen unless it paused longer than that, while a job that
// saves whole files and renames them into place, however often, leaves
// gaps far longer. An unkept capture is tried again every checkpointRetry.
// A folder that never settles for a whole checkpoint interval (a job that
// appends to a file in it all the time) is taken at the next interval's
// first capture that saw no change during its import. The capture after
// the run, with every process of the job gone, is kept as it is.
const (
	checkpointSettle = 100 * time.Millisecond
	checkpointRetry  = 50 * time.Millisecond
)

// captureMode says what a capture of the checkpoint folder must show to be
// kept.
type captureMode int

const (
	// captureFinal: the job has stopped; the folder is kept as it is.
	captureFinal captureMode = iota
	// captureSettled: unchanged for checkpointSettle before the import,
	// and during it.
	captureSettled
	// captureSteady: unchanged during the import.
	captureSteady
)

// errUnsettled says a capture was not kept: the folder was changing.
// errChangedWhileRead, which wraps it, says so after an import: a retry
// costs a read of the whole folder again, so such retries back off
// (retryAfter).
var (
	errUnsettled        = errors.New("checkpoint folder was changing")
	errChangedWhileRead = fmt.Errorf("%w while it was read", errUnsettled)
)

// retryAfter is how long to wait before the next capture after one that
// was not kept: checkpointRetry while the folder was only seen changing,
// doubling with each capture in a row that read it all for nothing, to at
// most the checkpoint interval.
func retryAfter(readInVain int, every time.Duration) time.Duration {
	d := checkpointRetry << min(readInVain, 16)
	return min(d, max(every, checkpointRetry))
}

// folderState is what a capture is checked against: a digest of every
// entry's path, type and mode, size, inode and modification time, and the
// newest of those times.
type folderState struct {
	sum    [sha256.Size]byte
	newest time.Time
}

// readFolderState walks dir. An entry that vanishes during the walk is an
// error wrapping fs.ErrNotExist: the folder is changing.
func readFolderState(dir string) (folderState, error) {
	h := sha256.New()
	var newest time.Time
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		var ino uint64
		if st, ok := fi.Sys().(*syscall.Stat_t); ok {
			ino = st.Ino
		}
		fmt.Fprintf(h, "%q %o %d %d %d\n", rel, fi.Mode(), fi.Size(), ino, fi.ModTime().UnixNano())
		if m := fi.ModTime(); m.After(newest) {
			newest = m
		}
		return nil
	})
	if err != nil {
		return folderState{}, err
	}
	var s folderState
	h.Sum(s.sum[:0])
	s.newest = newest
	return s, nil
}

// changed reports whether dir is no longer as s found it, or cannot be
// read whole.
func (s folderState) changed(dir string) bool {
	now, err := readFolderState(dir)
	return err != nil || now.sum != s.sum
}
