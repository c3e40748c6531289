package main

import (
	"fmt"
	"log/slog"

	"github.com/e31network/e31/cmd/e31d/doctor"
)

// checkAtStart runs, before the node opens its data dir, the check of
// e31d doctor that a start can afford: the data dir's. A data dir that
// cannot be written stops the daemon, with the fix, since nothing works
// without it; anything else the check fails or warns of is a warning in
// the log, and the daemon starts. (A missing or failing OCI runtime is
// told by the node when it looks for one.) simulatedDisk skips the free
// space, which --debug-disk-free stands in for.
func checkAtStart(log *slog.Logger, h doctor.Host, o doctor.Options, simulatedDisk bool) error {
	d, err := h.Disk(o.DataDir)
	if err == nil && d.NotWritable != nil {
		return fmt.Errorf("data dir %s cannot be written (%w): name a data dir on a writable filesystem with --data, or remount that one read-write", o.DataDir, d.NotWritable)
	}
	if simulatedDisk {
		return nil
	}
	if r := doctor.CheckDisk(h, o); r.Status != doctor.OK {
		log.Warn("e31d doctor's "+r.Name+" check would "+string(r.Status)+": "+r.Detail, "fix", r.Fix)
	}
	return nil
}
