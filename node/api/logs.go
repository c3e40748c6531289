package api

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
)

// LogOptions say which of a job's logs to read and how
// (GET /v1/jobs/{id}/logs?stream=stdout|stderr&follow=1&tail=N).
type LogOptions struct {
	// Stream is "stdout" (the default) or "stderr".
	Stream string
	// Follow goes on while the job runs, until its log is complete.
	Follow bool
	// TailLines starts at the last TailLines lines; 0 starts at the
	// beginning.
	TailLines int
}

// LogErrorTrailer is the HTTP trailer in which the daemon says why a log it
// had begun to send ended early (the provider stopped answering); absent
// when the log ended because it was complete.
const LogErrorTrailer = "E31-Log-Error"

// LogStopTrailer is the HTTP trailer, "1" when set, by which the daemon says
// that a log it had begun to send ended because the daemon is stopping: a
// follower asks again once it is back (Client.Logs wraps ErrNoDaemon then).
const LogStopTrailer = "E31-Log-Stop"

// ErrLogCut means the daemon began sending a log and could not finish it.
var ErrLogCut = errors.New("log cut short")

// Query is the options as the API's query string.
func (o LogOptions) Query() url.Values {
	q := url.Values{}
	if o.Stream != "" {
		q.Set("stream", o.Stream)
	}
	if o.Follow {
		q.Set("follow", "1")
	}
	if o.TailLines > 0 {
		q.Set("tail", strconv.Itoa(o.TailLines))
	}
	return q
}

// Logs copies a job's log to w as the daemon sends it. A log the daemon
// could not finish is an error wrapping ErrLogCut, with its reason; one cut
// because the daemon stopped (or went away) wraps ErrNoDaemon too.
func (c *Client) Logs(ctx context.Context, id string, o LogOptions, w io.Writer) error {
	resp, err := c.send(ctx, http.MethodGet, "/v1/jobs/"+url.PathEscape(id)+"/logs", o.Query(), nil)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	buf := make([]byte, 32<<10)
	for {
		n, rerr := resp.Body.Read(buf)
		if n > 0 {
			if _, err := w.Write(buf[:n]); err != nil {
				return err
			}
		}
		if errors.Is(rerr, io.EOF) {
			break
		}
		if rerr != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return fmt.Errorf("%w: %w: the daemon stopped sending: %v", ErrLogCut, ErrNoDaemon, rerr)
		}
	}
	if resp.Trailer.Get(LogStopTrailer) != "" {
		return fmt.Errorf("%w: %w at %s: it is stopping", ErrLogCut, ErrNoDaemon, c.addr)
	}
	if msg := resp.Trailer.Get(LogErrorTrailer); msg != "" {
		return fmt.Errorf("%w: %s", ErrLogCut, msg)
	}
	return nil
}
