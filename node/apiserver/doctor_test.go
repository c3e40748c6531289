package apiserver_test

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/e31network/e31/node/api"
	"github.com/e31network/e31/node/apiserver"
)

// GET /v1/doctor answers with the daemon's checks where it has them, says
// so where it has none, and is never served on the dashboard's port.
func TestDoctor(t *testing.T) {
	ctx := context.Background()
	report := api.DoctorReport{Checks: []api.DoctorCheck{
		{Name: "root", Status: api.DoctorOK, Detail: "running as root"},
		{Name: "gpus", Status: api.DoctorWarn, Detail: "no GPUs", Fix: "install the driver"},
	}}
	var calls atomic.Int32
	cfg := apiserver.Config{Log: slog.New(slog.DiscardHandler), Doctor: func(context.Context) api.DoctorReport {
		calls.Add(1)
		return report
	}}
	srv := httptest.NewServer(apiserver.Handler(cfg))
	t.Cleanup(srv.Close)
	got, err := api.NewClient(strings.TrimPrefix(srv.URL, "http://")).Doctor(ctx)
	if err != nil || calls.Load() != 1 || len(got.Checks) != 2 || got.Checks[1] != report.Checks[1] {
		t.Fatalf("Doctor = %+v, %v after %d calls; want %+v", got, err, calls.Load(), report)
	}

	none := httptest.NewServer(apiserver.Handler(apiserver.Config{Log: slog.New(slog.DiscardHandler)}))
	t.Cleanup(none.Close)
	_, err = api.NewClient(strings.TrimPrefix(none.URL, "http://")).Doctor(ctx)
	if err == nil || !strings.Contains(err.Error(), "e31d doctor") {
		t.Fatalf("a daemon without checks: %v, want an error pointing at e31d doctor", err)
	}

	cfg.Access = apiserver.NewAccess(testToken)
	ui, err := apiserver.ListenUI(ctx, "127.0.0.1:0", cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ui.Shutdown(ctx) })
	resp, err := withToken.Get("http://" + ui.Addr() + "/v1/doctor")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode == http.StatusOK || calls.Load() != 1 {
		t.Fatalf("the dashboard's port answered /v1/doctor with %s, %d checks run", resp.Status, calls.Load())
	}
}

func TestDoctorReportText(t *testing.T) {
	var b strings.Builder
	r := api.DoctorReport{Checks: []api.DoctorCheck{
		{Name: "root", Status: api.DoctorOK, Detail: "as root"},
		{Name: "runtime", Status: api.DoctorFail, Detail: "no runc", Fix: "apt-get install -y runc"},
	}}
	if err := r.WriteText(&b); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{"ok    root", "fail  runtime  no runc", "fix: apt-get install -y runc", "1 ok, 0 warnings, 1 failed"} {
		if !strings.Contains(out, want) {
			t.Errorf("text lacks %q:\n%s", want, out)
		}
	}
	if r.Count(api.DoctorFail) != 1 {
		t.Errorf("Count(fail) = %d", r.Count(api.DoctorFail))
	}
}
