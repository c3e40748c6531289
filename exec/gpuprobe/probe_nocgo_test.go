//go:build !cgo

package gpuprobe

import (
	"context"
	"errors"
	"strings"
	"testing"
)

func TestProbeWithoutCgo(t *testing.T) {
	rep, err := Probe(context.Background())
	if err == nil || !strings.Contains(err.Error(), "without cgo") || errors.Is(err, ErrNoDriver) {
		t.Errorf("error %v, want one saying the binary was built without cgo", err)
	}
	if rep.Error != err.Error() || rep.NoDriver || rep.Devices == nil {
		t.Errorf("report %+v", rep)
	}
}
