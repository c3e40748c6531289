package main

import (
	"bytes"
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/e31network/e31/cmd/e31d/doctor"
)

// diskHost is a machine of which the start's check asks the disk alone.
type diskHost struct {
	doctor.Host
	disk doctor.Disk
}

func (h diskHost) Disk(string) (doctor.Disk, error) { return h.disk, nil }

func TestCheckAtStart(t *testing.T) {
	o := doctor.Options{DataDir: "/var/lib/e31", ImageCacheBytes: 64 << 30}
	roomy := doctor.Disk{Mount: "/var/lib", Free: 500 << 30, Size: 1 << 40}
	readOnly := doctor.Disk{Mount: "/var/lib", Free: 1 << 20, Size: 1 << 40, NotWritable: errors.New("/var/lib is on a read-only filesystem")}
	full := doctor.Disk{Mount: "/var/lib", Free: 100 << 20, Size: 1 << 40}
	for _, tc := range []struct {
		name      string
		disk      doctor.Disk
		simulated bool
		err, warn string // fragments; "" for none
	}{
		{"roomy", roomy, false, "", ""},
		{"read-only", readOnly, false, "data dir /var/lib/e31 cannot be written (/var/lib is on a read-only filesystem): name a data dir on a writable filesystem", ""},
		{"read-only, simulated disk", readOnly, true, "cannot be written", ""},
		{"full", full, false, "", "e31d doctor's disk check would fail: data dir /var/lib/e31: only 100.0 MiB free"},
		{"full, simulated disk", full, true, "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var logs bytes.Buffer
			err := checkAtStart(slog.New(slog.NewTextHandler(&logs, nil)), diskHost{disk: tc.disk}, o, tc.simulated)
			switch {
			case tc.err == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
				t.Fatalf("error %v, want %q", err, tc.err)
			}
			switch {
			case tc.warn == "" && logs.Len() > 0:
				t.Fatalf("logged %s", logs.String())
			case tc.warn != "" && !strings.Contains(logs.String(), tc.warn):
				t.Fatalf("log %q lacks %q", logs.String(), tc.warn)
			}
		})
	}
}
