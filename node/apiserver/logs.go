package apiserver

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"

	"github.com/e31network/e31/node/api"
)

// Logs are this node's jobs' logs (submitter.Submitter).
type Logs interface {
	Logs(ctx context.Context, id string, o api.LogOptions, w io.Writer) error
}

// logs streams a job's log as chunked text, each piece flushed as it comes.
// An error before the first byte is an HTTP status; one after it, when the
// status is sent, goes in the api.LogErrorTrailer trailer.
func (s *Server) logs(w http.ResponseWriter, r *http.Request) {
	if s.cfg.Logs == nil {
		writeError(w, fmt.Errorf("this node serves no logs"))
		return
	}
	q := r.URL.Query()
	o := api.LogOptions{Stream: q.Get("stream")}
	switch q.Get("follow") {
	case "", "0", "false":
	case "1", "true":
		o.Follow = true
	default:
		writeError(w, badRequest(fmt.Errorf("follow=%q: want 1 or 0", q.Get("follow"))))
		return
	}
	if t := q.Get("tail"); t != "" {
		n, err := strconv.Atoi(t)
		if err != nil || n < 0 {
			writeError(w, badRequest(fmt.Errorf("tail=%q: want a number of lines", t)))
			return
		}
		o.TailLines = n
	}
	w.Header().Set("Trailer", api.LogErrorTrailer+", "+api.LogStopTrailer)
	fw := &flushWriter{w: w}
	err := s.cfg.Logs.Logs(r.Context(), r.PathValue("id"), o, fw)
	switch {
	case err == nil:
		if !fw.started {
			fw.start()
		}
	case !fw.started:
		writeError(w, err)
	case r.Context().Err() != nil:
		// The daemon is stopping (or the reader left, and reads nothing
		// more): a follower asks again once the daemon is back.
		w.Header().Set(api.LogErrorTrailer, errStopping.Error())
		w.Header().Set(api.LogStopTrailer, "1")
	default:
		w.Header().Set(api.LogErrorTrailer, err.Error())
	}
}

// flushWriter sends each write at once, and the status and headers with
// the first.
type flushWriter struct {
	w       http.ResponseWriter
	started bool
}

func (f *flushWriter) start() {
	f.started = true
	f.w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	f.w.Header().Set("X-Content-Type-Options", "nosniff")
	f.w.WriteHeader(http.StatusOK)
}

func (f *flushWriter) Write(p []byte) (int, error) {
	if !f.started {
		f.start()
	}
	n, err := f.w.Write(p)
	if fl, ok := f.w.(http.Flusher); ok {
		fl.Flush()
	}
	return n, err
}
