//go:build !cgo

package nvidia

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"
)

func TestDiscoverWithoutCgo(t *testing.T) {
	var logs bytes.Buffer
	if gpus := Discover(context.Background(), slog.New(slog.NewTextHandler(&logs, nil))); len(gpus) != 0 {
		t.Fatalf("%d GPUs without cgo", len(gpus))
	}
	if strings.Count(logs.String(), "\n") != 1 || !strings.Contains(logs.String(), "cgo") {
		t.Errorf("want one line naming cgo, got %q", logs.String())
	}
}
