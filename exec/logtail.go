package exec

import (
	"fmt"
	"io"
	"os"
)

// tailFile is an io.Writer onto a file that keeps only the last limit
// bytes written. It lets the file grow to twice the limit and then moves
// the last limit bytes to the front, so the cost of trimming is spread
// over limit bytes of output and the file can be read while the job runs.
// Close cuts the file to exactly the last limit bytes. It is used by one
// writer goroutine at a time.
type tailFile struct {
	f     *os.File
	limit int64
	size  int64
	buf   []byte // scratch for compaction, allocated on first use
}

func createTailFile(name string, limit int64) (*tailFile, error) {
	f, err := os.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return nil, fmt.Errorf("create log: %w", err)
	}
	return &tailFile{f: f, limit: limit}, nil
}

func (t *tailFile) Write(p []byte) (int, error) {
	n := len(p)
	if int64(len(p)) >= t.limit {
		// The write alone fills the tail: nothing before it survives.
		if err := t.f.Truncate(0); err != nil {
			return 0, fmt.Errorf("trim log: %w", err)
		}
		if _, err := t.f.Seek(0, io.SeekStart); err != nil {
			return 0, fmt.Errorf("trim log: %w", err)
		}
		t.size = 0
		p = p[int64(len(p))-t.limit:]
	}
	w, err := t.f.Write(p)
	t.size += int64(w)
	if err != nil {
		return w, fmt.Errorf("write log: %w", err)
	}
	if t.size > 2*t.limit {
		if err := t.compact(); err != nil {
			return n, err
		}
	}
	return n, nil
}

// compact moves the last limit bytes to the front of the file.
func (t *tailFile) compact() error {
	if t.size <= t.limit {
		return nil
	}
	if t.buf == nil {
		t.buf = make([]byte, t.limit)
	}
	if _, err := t.f.ReadAt(t.buf, t.size-t.limit); err != nil {
		return fmt.Errorf("trim log: %w", err)
	}
	if _, err := t.f.WriteAt(t.buf, 0); err != nil {
		return fmt.Errorf("trim log: %w", err)
	}
	if err := t.f.Truncate(t.limit); err != nil {
		return fmt.Errorf("trim log: %w", err)
	}
	if _, err := t.f.Seek(t.limit, io.SeekStart); err != nil {
		return fmt.Errorf("trim log: %w", err)
	}
	t.size = t.limit
	return nil
}

// Close trims the file to its last limit bytes and closes it.
func (t *tailFile) Close() error {
	err := t.compact()
	if cerr := t.f.Close(); err == nil && cerr != nil {
		err = fmt.Errorf("close log: %w", cerr)
	}
	return err
}
