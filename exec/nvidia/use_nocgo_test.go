//go:build !cgo

package nvidia

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"
)

func TestOpenUseWithoutCgo(t *testing.T) {
	var logs bytes.Buffer
	r := OpenUse(context.Background(), UseOptions{Log: slog.New(slog.NewTextHandler(&logs, nil))})
	use, err := r.Use(context.Background())
	if err != nil || len(use) != 0 {
		t.Fatalf("Use = %v, %v; want no GPUs", use, err)
	}
	if strings.Count(logs.String(), "\n") != 1 || !strings.Contains(logs.String(), "cgo") {
		t.Errorf("want one line naming cgo, got %q", logs.String())
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Use(context.Background()); err == nil {
		t.Error("Use after Close did not fail")
	}
}
