package main

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/e31network/e31/node/api"
	"github.com/e31network/e31/node/apiserver"
)

// e31 doctor prints the daemon's checks, as text or JSON, and fails when
// one failed.
func TestDoctorAsksTheDaemon(t *testing.T) {
	report := api.DoctorReport{Checks: []api.DoctorCheck{{Name: "root", Status: api.DoctorOK, Detail: "as root"}}}
	srv := httptest.NewServer(apiserver.Handler(apiserver.Config{Log: slog.New(slog.DiscardHandler),
		Doctor: func(context.Context) api.DoctorReport { return report }}))
	t.Cleanup(srv.Close)
	var out, errOut strings.Builder
	g := &globalOptions{api: strings.TrimPrefix(srv.URL, "http://"), stdout: &out, stderr: &errOut}
	ctx := context.Background()
	if err := runDoctor(ctx, doctorOptions{}, g); err != nil || !strings.Contains(out.String(), "1 ok, 0 warnings, 0 failed") {
		t.Fatalf("text: %v\n%s", err, out.String())
	}
	out.Reset()
	if err := runDoctor(ctx, doctorOptions{json: true}, g); err != nil {
		t.Fatal(err)
	}
	var got api.DoctorReport
	if err := json.Unmarshal([]byte(out.String()), &got); err != nil || len(got.Checks) != 1 || got.Checks[0] != report.Checks[0] {
		t.Fatalf("json: %+v, %v", got, err)
	}
	report.Checks = append(report.Checks, api.DoctorCheck{Name: "runtime", Status: api.DoctorFail, Detail: "no runc"})
	if err := runDoctor(ctx, doctorOptions{}, g); !errors.Is(err, errChecksFailed) {
		t.Fatalf("a failed check: %v, want errChecksFailed", err)
	}
}

// Where no daemon answers, e31 doctor runs e31d doctor, passing --json on.
func TestDoctorWithoutADaemonRunsE31d(t *testing.T) {
	bin := t.TempDir()
	script := "#!/bin/sh\necho \"ran $*\"\nexit 1\n"
	if err := os.WriteFile(filepath.Join(bin, "e31d"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", bin)
	var out, errOut strings.Builder
	g := &globalOptions{api: "127.0.0.1:1", stdout: &out, stderr: &errOut}
	err := runDoctor(context.Background(), doctorOptions{json: true}, g)
	if !errors.Is(err, errChecksFailed) || strings.TrimSpace(out.String()) != "ran doctor --json" {
		t.Fatalf("err %v, output %q", err, out.String())
	}
	if !strings.Contains(errOut.String(), "no e31d answers") {
		t.Errorf("stderr %q does not say why e31d doctor ran", errOut.String())
	}
	t.Setenv("PATH", t.TempDir())
	if err := runDoctor(context.Background(), doctorOptions{}, g); !errors.Is(err, api.ErrNoDaemon) {
		t.Fatalf("no daemon and no e31d: %v", err)
	}
}
