package apiserver_test

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/e31network/e31/node/api"
	"github.com/e31network/e31/node/apiserver"
)

// waitJobs answers WaitJob with the next version, and says what it was
// asked and for how long.
type waitJobs struct {
	submitterJobs
	asked chan waitAsk
}

type waitAsk struct {
	id   string
	seen uint64
	left time.Duration
}

func (w waitJobs) WaitJob(ctx context.Context, id string, seen uint64) (api.Job, error) {
	deadline, _ := ctx.Deadline()
	w.asked <- waitAsk{id: id, seen: seen, left: time.Until(deadline)}
	return api.Job{ID: id, Version: seen + 1}, nil
}

// GET /v1/jobs/{id}?wait= hands the version and the wait, capped, to the
// submitter; a wait that is not a duration, or a version without a wait,
// is refused.
func TestJobWait(t *testing.T) {
	w := waitJobs{asked: make(chan waitAsk, 1)}
	srv := httptest.NewServer(apiserver.Handler(apiserver.Config{Jobs: w, Log: slog.New(slog.DiscardHandler)}))
	t.Cleanup(srv.Close)
	cl := api.NewClient(strings.TrimPrefix(srv.URL, "http://"))
	ctx := context.Background()

	j, err := cl.WaitJob(ctx, "job1", 7, 2*time.Second)
	if err != nil || j.Version != 8 {
		t.Fatalf("WaitJob = %+v, %v; want version 8", j, err)
	}
	if a := <-w.asked; a.id != "job1" || a.seen != 7 || a.left <= 0 || a.left > 2*time.Second {
		t.Fatalf("asked %+v, want job1 at version 7 for at most 2s", a)
	}
	if _, err := cl.WaitJob(ctx, "job1", 0, 100*time.Hour); err != nil {
		t.Fatal(err)
	}
	if a := <-w.asked; a.left > 5*time.Minute {
		t.Fatalf("a wait of 100h held for %s, want it capped at 5m", a.left)
	}

	for _, q := range []string{"wait=soon", "wait=-1s", "version=3", "wait=1s&version=x"} {
		resp, err := http.Get(srv.URL + "/v1/jobs/job1?" + q)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest {
			t.Errorf("?%s: status %d, want 400", q, resp.StatusCode)
		}
	}
	select {
	case a := <-w.asked:
		t.Fatalf("a refused request reached the submitter: %+v", a)
	default:
	}
}
