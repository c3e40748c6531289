package provider

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/e31network/e31/node/joblog"
	"github.com/e31network/e31/node/wire"
	"github.com/e31network/e31/p2p"
	"github.com/libp2p/go-libp2p/core/peer"
)

// logPoll is how often a waiting logs request looks for new bytes: a
// follower sees a line this long after it is written, at worst.
const logPoll = 100 * time.Millisecond

// HandleLogs answers a follower of a job's stdout or stderr
// (wire.ProtoLogs), from the log file the sandbox writes. Only the lease's
// submitter may read it. It waits for new bytes up to the request's
// WaitMs, looking at the file's size, never at the job: the job writes to a
// file and nothing here can slow it.
func (p *Provider) HandleLogs(ctx context.Context, from peer.ID, raw json.RawMessage) (any, error) {
	req, err := wire.DecodeLogsRequest(raw)
	if err != nil {
		return nil, err
	}
	l := p.leases.lookup(req.Lease)
	if l == nil {
		return nil, p2p.Refuse(wire.CodeLogsGone, fmt.Errorf("lease %s is not running here; its logs come back with its output", req.Lease))
	}
	if t := l.snapshot().Lease.Terms; t.Job != req.Job || t.Submitter != from.String() {
		return nil, p2p.Refuse(wire.CodeUnknownJob, fmt.Errorf("no job %s of yours under lease %s", req.Job, req.Lease))
	}
	path := filepath.Join(l.dir(), "run", req.Stream+".log")
	deadline := time.Now().Add(time.Duration(req.WaitMs) * time.Millisecond)
	tick := time.NewTicker(logPoll)
	defer tick.Stop()
	for {
		// The run's end is read before the file: a log read after the run
		// ended is the whole log.
		rec := l.snapshot()
		ended := rec.Outcome != ""
		rep, err := readLogFile(path, req)
		switch {
		case errors.Is(err, fs.ErrNotExist) && ended && !rec.RunStart.IsZero():
			// Released and cleaned up while this request waited.
			return nil, p2p.Refuse(wire.CodeLogsGone, fmt.Errorf("the run of lease %s is over; its logs come back with its output", req.Lease))
		case errors.Is(err, fs.ErrNotExist):
			// Not started yet, or never to start: an empty log so far.
			rep, err = wire.LogsReply{Dropped: req.Offset > 0}, nil
		case err != nil:
			return nil, err
		}
		rep.Ended = ended && rep.Offset+int64(len(rep.Data)) >= rep.Size
		if len(rep.Data) > 0 || rep.Dropped || rep.Ended || !time.Now().Before(deadline) {
			return rep, nil
		}
		select {
		case <-ctx.Done():
			return rep, nil
		case <-tick.C:
		}
	}
}

// readLogFile reads a piece of a log file.
func readLogFile(path string, req wire.LogsRequest) (wire.LogsReply, error) {
	f, err := os.Open(path)
	if err != nil {
		return wire.LogsReply{}, fmt.Errorf("open log: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return wire.LogsReply{}, fmt.Errorf("open log: %w", err)
	}
	return joblog.Read(f, st.Size(), req, wire.MaxLogChunk)
}
