package main

import (
	"hash"
	"hash/fnv"
	"io"
)

// logResume writes a followed log across restarts of the daemon, which
// sends the log again from its beginning when asked again: the bytes
// already written are dropped, once the log sent again is seen to begin
// as the one written did. The daemon reads a running job's log from its
// provider, which keeps only the tail of a long one, so a log sent again
// may begin otherwise; then mismatch is called, once, and the log goes on
// from the same count of bytes.
type logResume struct {
	w io.Writer
	// written counts the bytes written to w; sum hashes them.
	written int64
	sum     hash.Hash64

	// While skip > 0, the log is being sent again: its first skip bytes
	// are hashed into again, not written; want is sum as it was.
	skip     int64
	again    hash.Hash64
	want     uint64
	mismatch func()
	// reached is called at each write: the daemon is sending.
	reached func()
}

func newLogResume(w io.Writer, reached, mismatch func()) *logResume {
	return &logResume{w: w, sum: fnv.New64a(), reached: reached, mismatch: mismatch}
}

// restart makes the next bytes written the log sent again from its
// beginning.
func (l *logResume) restart() {
	l.skip, l.again, l.want = l.written, fnv.New64a(), l.sum.Sum64()
}

func (l *logResume) Write(p []byte) (int, error) {
	n := len(p)
	if l.reached != nil && n > 0 {
		l.reached()
	}
	if l.skip > 0 {
		k := min(int64(len(p)), l.skip)
		_, _ = l.again.Write(p[:k])
		l.skip -= k
		p = p[k:]
		if l.skip == 0 && l.again.Sum64() != l.want && l.mismatch != nil {
			l.mismatch()
		}
	}
	if len(p) == 0 {
		return n, nil
	}
	m, err := l.w.Write(p)
	_, _ = l.sum.Write(p[:m])
	l.written += int64(m)
	if err != nil {
		return n - len(p) + m, err
	}
	return n, nil
}
