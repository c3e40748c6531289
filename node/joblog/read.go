package joblog

import (
	"bytes"
	"errors"
	"fmt"
	"io"

	"github.com/e31network/e31/node/wire"
)

// maxScan bounds how much of a log Read scans for a tail or a lost anchor:
// more than a trimmed log ever holds (twice exec.DefaultLogCap), so that a
// log never costs more than that to place a reader.
const maxScan = 32 << 20

// Marker is written where a follower's log has a gap.
const Marker = "\n[e31: the provider kept only the tail of this log; output is missing here]\n"

// Read answers a request for a piece of a log of size bytes read through r,
// up to max bytes: it places the reader (see the package doc), and returns
// the reply without Ended, which only the log's owner knows.
func Read(r io.ReaderAt, size int64, req wire.LogsRequest, max int) (wire.LogsReply, error) {
	start, dropped, err := place(r, size, req)
	if err != nil {
		return wire.LogsReply{}, err
	}
	n := min(int64(max), size-start)
	rep := wire.LogsReply{Offset: start, Dropped: dropped, Size: size}
	if n > 0 {
		rep.Data = make([]byte, n)
		if _, err := r.ReadAt(rep.Data, start); err != nil && !errors.Is(err, io.EOF) {
			return wire.LogsReply{}, fmt.Errorf("read log: %w", err)
		}
	}
	return rep, nil
}

// place finds where the reader of req goes on in the log.
func place(r io.ReaderAt, size int64, req wire.LogsRequest) (start int64, dropped bool, err error) {
	if req.Offset == 0 && len(req.After) == 0 {
		if req.TailLines > 0 {
			start, err := tailStart(r, size, req.TailLines)
			return start, false, err
		}
		return 0, false, nil
	}
	if len(req.After) == 0 {
		// No anchor: the offset is all there is to go on.
		if req.Offset > size {
			return 0, true, nil
		}
		return req.Offset, false, nil
	}
	from := req.Offset - int64(len(req.After))
	if req.Offset <= size {
		got := make([]byte, len(req.After))
		if _, err := r.ReadAt(got, from); err != nil && !errors.Is(err, io.EOF) {
			return 0, false, fmt.Errorf("read log: %w", err)
		}
		if bytes.Equal(got, req.After) {
			return req.Offset, false, nil
		}
	}
	// Trimmed under the reader: what it read last moved towards the front.
	// The last copy of the anchor that ends before the old offset is where
	// it was.
	if end, ok, err := lastIndex(r, min(size, req.Offset), req.After); err != nil || ok {
		return end, false, err
	}
	return 0, true, nil
}

// scanBlock is how much of a log lastIndex reads at a time, so that
// placing a reader costs a bounded buffer however long the log.
const scanBlock = 256 << 10

// lastIndex finds the last copy of pat that ends at or before end, looking
// back at most maxScan bytes, and returns where it ends.
func lastIndex(r io.ReaderAt, end int64, pat []byte) (int64, bool, error) {
	buf := make([]byte, scanBlock+len(pat))
	for hi := end; hi > 0 && end-hi < maxScan; {
		lo := max(0, hi-scanBlock-int64(len(pat))+1)
		if hi-lo < int64(len(pat)) {
			break
		}
		b := buf[:hi-lo]
		if _, err := r.ReadAt(b, lo); err != nil && !errors.Is(err, io.EOF) {
			return 0, false, fmt.Errorf("read log: %w", err)
		}
		if i := bytes.LastIndex(b, pat); i >= 0 {
			return lo + int64(i+len(pat)), true, nil
		}
		// The next block overlaps this one by len(pat)-1 bytes, so that a
		// copy across the boundary is found.
		hi = lo + int64(len(pat)) - 1
		if lo == 0 {
			break
		}
	}
	return 0, false, nil
}

// tailStart is where the last lines lines of the log begin; a final line
// without its newline counts as a line.
func tailStart(r io.ReaderAt, size int64, lines int) (int64, error) {
	const block = 64 << 10
	buf := make([]byte, block)
	end := size
	seen := 0
	for end > 0 && size-end < maxScan {
		n := min(int64(block), end)
		b := buf[:n]
		if _, err := r.ReadAt(b, end-n); err != nil && !errors.Is(err, io.EOF) {
			return 0, fmt.Errorf("read log: %w", err)
		}
		for i := len(b) - 1; i >= 0; i-- {
			if b[i] != '\n' || end-n+int64(i) == size-1 {
				continue // a newline ending the log closes the last line, not one before it
			}
			seen++
			if seen == lines {
				return end - n + int64(i) + 1, nil
			}
		}
		end -= n
	}
	return end, nil
}

// Cursor is a reader's place in a log: the offset it reached and the last
// bytes it read there.
type Cursor struct {
	Offset int64
	After  []byte
}

// Request returns a request for what follows the cursor; tailLines applies
// only before anything was read.
func (c *Cursor) Request(lease, job, stream string, tailLines int, wait int64) wire.LogsRequest {
	req := wire.LogsRequest{Lease: lease, Job: job, Stream: stream, Offset: c.Offset, After: c.After, WaitMs: wait}
	if c.Offset == 0 && len(c.After) == 0 {
		req.TailLines = tailLines
	}
	return req
}

// Advance moves the cursor past a reply's data.
func (c *Cursor) Advance(rep wire.LogsReply) {
	var anchor []byte
	if !rep.Dropped {
		// Read placed the reader right after its anchor, where it was or
		// where the anchor moved to.
		anchor = append(anchor, c.After...)
	}
	anchor = append(anchor, rep.Data...)
	if len(anchor) > wire.MaxLogAnchor {
		anchor = anchor[len(anchor)-wire.MaxLogAnchor:]
	}
	c.Offset = rep.Offset + int64(len(rep.Data))
	c.After = anchor
}
