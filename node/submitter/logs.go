package submitter

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/e31network/e31/market"
	"github.com/e31network/e31/node/api"
	"github.com/e31network/e31/node/joblog"
	"github.com/e31network/e31/node/task"
	"github.com/e31network/e31/node/wire"
	"github.com/e31network/e31/p2p"
	"github.com/ipfs/go-cid"
	"github.com/libp2p/go-libp2p/core/peer"
)

// ErrLogLost: a log that was being followed cannot go on: the provider
// stopped answering, or the job ended without its logs coming back.
var ErrLogLost = errors.New("log lost")

// LogStore reads files out of a DAG in the local store (content.Store):
// the logs that came back with a job's output. It is part of Store.
type LogStore interface {
	Resolve(ctx context.Context, root cid.Cid, path string) (cid.Cid, error)
	Open(ctx context.Context, c cid.Cid) (io.ReadSeekCloser, error)
}

// How a follower asks a provider for its job's log.
const (
	// logWait is how long a follower's request waits on the provider for
	// new bytes: long enough that an idle job costs a request every few
	// seconds, short enough to fit a stream's timeout with room to spare.
	logWait = 5 * time.Second
	// logCallSlack is what a request may take beyond its wait.
	logCallSlack = 10 * time.Second
	// logRetries is how many requests in a row may fail before the
	// provider counts as gone for the follower.
	logRetries = 3
	// logPause is the pause after a failed request, and between looks at
	// a job whose run has not started or whose output is not here yet.
	logPause = time.Second
	// logIdlePause is the pause after a reply with nothing new.
	logIdlePause = 100 * time.Millisecond
)

// Logs writes one of a job's logs to w: from its provider while the run
// goes on, from the logs returned with the output after. Without
// o.Follow it writes what there is now and returns; with it, it goes on
// until the log is complete or ctx ends. A log that cannot be completed
// (the provider stopped answering, the job ended without its logs coming
// back) is an error wrapping ErrLogLost that says why; a job that has no
// log to show is a conflict.
//
// Under the ID it was submitted with, a job's log is that of each of its
// attempts in turn, each after a line that names it, and a follower goes
// on from an attempt lost with its provider to its resumption; with
// o.TailLines, only the last attempt's. Under an attempt's own ID, the log
// is that attempt's.
func (s *Submitter) Logs(ctx context.Context, id string, o api.LogOptions, w io.Writer) error {
	stream := o.Stream
	if stream == "" {
		stream = wire.StreamStdout
	}
	if stream != wire.StreamStdout && stream != wire.StreamStderr {
		return invalid(fmt.Errorf("stream %q: want %s or %s", stream, wire.StreamStdout, wire.StreamStderr))
	}
	j, err := s.jobs.find(id)
	if err != nil {
		return err
	}
	lr := logReader{s.kit}
	var root string
	var auto bool
	j.view(func(r *Record) {
		root = r.Root
		cp := r.Declaration.Output.Checkpoints
		auto = cp != nil && cp.Resume == market.ResumeAuto
	})
	if root != "" {
		return lr.attemptLogs(ctx, j.id, stream, o, false, w)
	}
	runs, err := lr.runs(ctx, j, o.Follow)
	if err != nil {
		return err
	}
	chain := runs
	if o.TailLines > 0 {
		chain = chain[len(chain)-1:]
	}
	n := len(runs) - len(chain) + 1
	cur := chain[0]
	for {
		err := lr.attemptLogs(ctx, cur.id, stream, o, o.Follow && auto, w)
		if err != nil && !errors.Is(err, ErrLogLost) && !errors.Is(err, ErrConflict) {
			return err
		}
		next, nerr := lr.nextAttempt(ctx, cur, o.Follow)
		if nerr != nil {
			return nerr
		}
		if next == nil {
			if n > 1 && errors.Is(err, ErrConflict) {
				return nil // an earlier attempt's log was shown
			}
			return err
		}
		if err != nil {
			if _, werr := fmt.Fprintf(w, "e31: the rest of attempt %d's %s was lost: %v\n", n, stream, err); werr != nil {
				return werr
			}
		}
		n++
		var from string
		next.view(func(r *Record) {
			if cp := r.Declaration.Output.Checkpoints; cp != nil {
				from = cp.From
			}
		})
		if from == "" {
			from = "the beginning"
		} else {
			from = "checkpoint " + from
		}
		if _, err := fmt.Fprintf(w, "e31: attempt %d of job %s (%s), from %s\n", n, j.id, next.id, from); err != nil {
			return err
		}
		cur = next
	}
}

// logReader reads the logs of a job's attempts, from their providers
// while they run and from their outputs once returned. It keeps no state
// of its own.
type logReader struct{ *kit }

// runs returns the attempts of the job whose first record is j, first to
// last, without a held job's record, which never runs; with follow it
// waits for a held job to be released.
func (s logReader) runs(ctx context.Context, j *jobTracker, follow bool) ([]*jobTracker, error) {
	for {
		chain := s.attempts(j)
		var held, waiting bool
		var state api.JobState
		var reason string
		chain[0].view(func(r *Record) {
			held, waiting = r.placeholder(), r.Hold != nil && !r.terminal()
			state, reason = r.State, r.Reason
			if waiting {
				reason = r.Wait
			}
		})
		switch {
		case !held:
			return chain, nil
		case len(chain) > 1:
			return chain[1:], nil
		case !waiting:
			return nil, conflict(fmt.Errorf("job %s ended %s before it ran (%s): it has no logs", j.id, state, reason))
		case !follow:
			return nil, conflict(fmt.Errorf("job %s is %s: it has no logs yet", j.id, reason))
		}
		if err := task.Sleep(ctx, logPause); err != nil {
			return nil, err
		}
	}
}

// nextAttempt returns the attempt that continues j, or nil when there is
// none; with follow it waits for one that is due (resumeDue).
func (s logReader) nextAttempt(ctx context.Context, j *jobTracker, follow bool) (*jobTracker, error) {
	for {
		var next string
		var due bool
		j.view(func(r *Record) { next, due = r.Next, r.resumeDue() })
		if next != "" {
			return s.jobs.get(next), nil
		}
		if !due || !follow {
			return nil, nil
		}
		if err := task.Sleep(ctx, logPause); err != nil {
			return nil, err
		}
	}
}

// attemptLogs is Logs for one attempt. patient, a follower waits out a
// provider that stops answering until the attempt ends (its job is resumed
// when the provider is lost) instead of giving up after logRetries.
func (s logReader) attemptLogs(ctx context.Context, id, stream string, o api.LogOptions, patient bool, w io.Writer) error {
	var cur joblog.Cursor
	failures := 0
	for {
		j, err := s.jobs.find(id)
		if err != nil {
			return err
		}
		var jobID, output, reason, outcome, lease, provider string
		var state api.JobState
		j.view(func(r *Record) {
			jobID, state, output, reason, outcome = r.ID, r.State, r.Output, r.Reason, string(r.Outcome)
			if r.Lease != nil {
				lease, provider = r.Lease.Terms.ID, r.Lease.Terms.Provider
			}
		})

		switch {
		case output != "":
			return logsFromOutput(ctx, s.d.Store, jobID, output, stream, &cur, o.TailLines, w)
		case state.Terminal() && lease == "":
			return conflict(fmt.Errorf("job %s ended %s before it ran: it has no logs", jobID, state))
		case state.Terminal():
			return fmt.Errorf("%w: job %s ended %s (%s) and its logs did not come back", ErrLogLost, jobID, outcome, reason)
		case lease == "" && !o.Follow:
			return conflict(fmt.Errorf("job %s is %s: it has no logs yet", jobID, state))
		case lease == "":
			if err := task.Sleep(ctx, logPause); err != nil {
				return err
			}
			continue
		}

		prov, err := peer.Decode(provider)
		if err != nil {
			return fmt.Errorf("job %s provider %q: %w", jobID, provider, err)
		}
		var wait time.Duration
		if o.Follow {
			wait = logWait
		}
		req := cur.Request(lease, jobID, stream, o.TailLines, wait.Milliseconds())
		var rep wire.LogsReply
		cctx, cancel := context.WithTimeout(ctx, wait+logCallSlack)
		err = s.d.Calls.Call(cctx, prov, wire.ProtoLogs, req, &rep)
		cancel()
		if err == nil {
			err = wire.CheckLogsReply(rep)
		}
		switch {
		case ctx.Err() != nil:
			return ctx.Err()
		case p2p.RefusalCode(err) == wire.CodeLogsGone:
			// The run is over and released: its logs come with the output,
			// which this node fetches before the release is final.
			if !o.Follow {
				return conflict(fmt.Errorf("the run of job %s is over and its logs are not here yet; they come back with its output", jobID))
			}
			if err := task.Sleep(ctx, logPause); err != nil {
				return err
			}
			continue
		case err != nil:
			failures++
			if failures == logRetries {
				if !patient {
					return fmt.Errorf("%w: provider %s stopped answering: %v", ErrLogLost, provider, err)
				}
				// The follower is told once, and waits for the resumption.
				if _, werr := fmt.Fprintf(w, "e31: provider %s stopped answering (%v); job %s resumes from its last checkpoint once the provider counts as lost\n", provider, err, jobID); werr != nil {
					return werr
				}
			}
			if err := task.Sleep(ctx, logPause); err != nil {
				return err
			}
			continue
		}
		failures = 0
		if err := writePiece(w, rep); err != nil {
			return err
		}
		cur.Advance(rep)
		if rep.Ended || (!o.Follow && cur.Offset >= rep.Size) {
			return nil
		}
		if len(rep.Data) == 0 && !rep.Dropped {
			// A provider answers an idle log after the wait; one that
			// answers at once with nothing must not be asked in a spin.
			if err := task.Sleep(ctx, logIdlePause); err != nil {
				return err
			}
		}
	}
}

// logsFromOutput writes a log from the copy returned with the output, from
// the cursor on.
func logsFromOutput(ctx context.Context, store LogStore, jobID, output, stream string, cur *joblog.Cursor, tail int, w io.Writer) error {
	root, err := cid.Decode(output)
	if err != nil {
		return fmt.Errorf("job %s output %q: %w", jobID, output, err)
	}
	c, err := store.Resolve(ctx, root, stream+".log")
	if err != nil {
		return fmt.Errorf("job %s: %s.log in its output: %w", jobID, stream, err)
	}
	f, err := store.Open(ctx, c)
	if err != nil {
		return fmt.Errorf("job %s: open %s.log: %w", jobID, stream, err)
	}
	defer f.Close()
	size, err := f.Seek(0, io.SeekEnd)
	if err != nil {
		return fmt.Errorf("job %s: %s.log: %w", jobID, stream, err)
	}
	r := &seekReaderAt{r: f}
	for {
		rep, err := joblog.Read(r, size, cur.Request("", jobID, stream, tail, 0), wire.MaxLogChunk)
		if err != nil {
			return fmt.Errorf("job %s: %w", jobID, err)
		}
		if err := writePiece(w, rep); err != nil {
			return err
		}
		cur.Advance(rep)
		if cur.Offset >= size {
			return nil
		}
	}
}

// writePiece writes a reply's bytes, after a marker where bytes were lost.
func writePiece(w io.Writer, rep wire.LogsReply) error {
	if rep.Dropped {
		if _, err := io.WriteString(w, joblog.Marker); err != nil {
			return err
		}
	}
	if len(rep.Data) == 0 {
		return nil
	}
	_, err := w.Write(rep.Data)
	return err
}

// seekReaderAt reads at offsets through a ReadSeeker.
type seekReaderAt struct {
	// mu is an ordering lock: it is held across each Seek and the Read
	// that follows, which share the reader's offset.
	mu sync.Mutex
	r  io.ReadSeeker
}

func (s *seekReaderAt) ReadAt(p []byte, off int64) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, err := s.r.Seek(off, io.SeekStart); err != nil {
		return 0, err
	}
	n, err := io.ReadFull(s.r, p)
	if errors.Is(err, io.ErrUnexpectedEOF) {
		err = io.EOF // as io.ReaderAt says of a short read at the end
	}
	return n, err
}
