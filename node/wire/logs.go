package wire

import (
	"errors"
	"fmt"

	"github.com/e31network/e31/p2p"
	"github.com/libp2p/go-libp2p/core/protocol"
)

// ProtoLogs: submitter → provider, a piece of a running job's stdout or
// stderr from an offset. The provider answers at once when the log holds
// bytes past the offset, else waits up to the request's WaitMs for some:
// a follower holds one request open at a time and the provider reads the
// log file the sandbox already writes, so a slow or absent reader costs
// the job nothing and the provider buffers nothing.
const ProtoLogs protocol.ID = "/e31/logs/1"

// CodeLogsGone: the provider no longer has the run's logs (the lease was
// released); they come back with the output.
const CodeLogsGone = "logs-gone"

// Log streams a job writes.
const (
	StreamStdout = "stdout"
	StreamStderr = "stderr"
)

// Bounds on a logs exchange, so that a request or reply always fits a frame
// (p2p.MaxFrame, with Data in base64) and a follower cannot hold a
// provider's handler longer than a stream's timeout.
const (
	// MaxLogChunk is the most bytes of log one reply carries.
	MaxLogChunk = 256 << 10
	// MaxLogAnchor is the most bytes a reader sends back of what it read
	// last (LogsRequest.After).
	MaxLogAnchor = 64
	// MaxLogWaitMs is the longest a request may ask the provider to wait
	// for new bytes.
	MaxLogWaitMs = 10_000
	// MaxLogTailLines is the most lines a request may ask for from the end.
	MaxLogTailLines = 100_000
)

// ErrBadLogs: a logs request or reply breaks the protocol's bounds.
var ErrBadLogs = errors.New("malformed logs message")

// LogsRequest asks for a piece of a job's log (ProtoLogs).
type LogsRequest struct {
	Lease  string `json:"lease"`
	Job    string `json:"job"`
	Stream string `json:"stream"` // StreamStdout or StreamStderr
	// Offset is where the reader stands in the log file.
	Offset int64 `json:"offset"`
	// After is what the reader read last, ending at Offset (at most
	// MaxLogAnchor bytes). The sandbox keeps only the tail of a long log,
	// moving it to the front of the file; the provider finds After again
	// to put the reader back where it was, or says bytes were dropped.
	After []byte `json:"after,omitempty"`
	// TailLines, on a first request (Offset 0, no After), starts at the
	// last TailLines lines instead of the beginning.
	TailLines int `json:"tail_lines,omitempty"`
	// WaitMs is how long the provider may wait for bytes past Offset
	// before it answers with none; 0 answers at once.
	WaitMs int64 `json:"wait_ms,omitempty"`
}

// LogsReply carries bytes of the log.
type LogsReply struct {
	// Offset is where Data starts in the log file: the reader's Offset,
	// or another place when the log was trimmed under it or it asked for
	// a tail.
	Offset int64  `json:"offset"`
	Data   []byte `json:"data,omitempty"`
	// Dropped: bytes between what the reader read last and Data are gone
	// (the log was trimmed to its tail under a reader that fell behind).
	Dropped bool `json:"dropped,omitempty"`
	// Size is the log file's size when it was read: a reader with Offset
	// + len(Data) < Size can ask again at once.
	Size int64 `json:"size"`
	// Ended: the run is over and the log complete; nothing will follow
	// Size.
	Ended bool `json:"ended,omitempty"`
}

// DecodeLogsRequest decodes and checks a logs request from a peer.
func DecodeLogsRequest(b []byte) (LogsRequest, error) {
	var r LogsRequest
	if err := p2p.DecodeStrict(b, &r); err != nil {
		return LogsRequest{}, err
	}
	return r, CheckLogsRequest(r)
}

// CheckLogsRequest reports what, if anything, breaks a request's bounds.
func CheckLogsRequest(r LogsRequest) error {
	switch {
	case r.Lease == "" || r.Job == "":
		return fmt.Errorf("%w: lease and job are required", ErrBadLogs)
	case r.Stream != StreamStdout && r.Stream != StreamStderr:
		return fmt.Errorf("%w: stream %q is neither %s nor %s", ErrBadLogs, r.Stream, StreamStdout, StreamStderr)
	case r.Offset < 0:
		return fmt.Errorf("%w: negative offset", ErrBadLogs)
	case len(r.After) > MaxLogAnchor:
		return fmt.Errorf("%w: after holds %d bytes, over %d", ErrBadLogs, len(r.After), MaxLogAnchor)
	case int64(len(r.After)) > r.Offset:
		return fmt.Errorf("%w: after reaches before the start of the log", ErrBadLogs)
	case r.TailLines < 0 || r.TailLines > MaxLogTailLines:
		return fmt.Errorf("%w: tail of %d lines is outside 0..%d", ErrBadLogs, r.TailLines, MaxLogTailLines)
	case r.WaitMs < 0 || r.WaitMs > MaxLogWaitMs:
		return fmt.Errorf("%w: wait of %d ms is outside 0..%d", ErrBadLogs, r.WaitMs, MaxLogWaitMs)
	}
	return nil
}

// DecodeLogsReply decodes and checks a provider's reply.
func DecodeLogsReply(b []byte) (LogsReply, error) {
	var r LogsReply
	if err := p2p.DecodeStrict(b, &r); err != nil {
		return LogsReply{}, err
	}
	return r, CheckLogsReply(r)
}

// CheckLogsReply reports what, if anything, breaks a reply's bounds.
func CheckLogsReply(r LogsReply) error {
	switch {
	case len(r.Data) > MaxLogChunk:
		return fmt.Errorf("%w: %d bytes in one reply, over %d", ErrBadLogs, len(r.Data), MaxLogChunk)
	case r.Offset < 0 || r.Size < 0:
		return fmt.Errorf("%w: negative offset or size", ErrBadLogs)
	case r.Offset > r.Size || int64(len(r.Data)) > r.Size-r.Offset:
		return fmt.Errorf("%w: data reaches past the log's size", ErrBadLogs)
	}
	return nil
}
