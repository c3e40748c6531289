package exec

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
)

// A job is stopped with SIGTERM, and given its grace to finish (save a
// checkpoint, flush its output) before SIGKILL. But the first process of a
// container is the init of its PID namespace, and the kernel drops a
// signal sent to an init that has no handler for it, from the host as
// from inside: `python3 train.py`, run as the job's command, ignores
// SIGTERM, where run from a shell it would die of it. Waiting out the grace
// for such a job holds its GPUs, on the meter, for nothing. So while the
// grace runs, the runner looks at the job's processes: once none of them
// has a handler for SIGTERM or holds it blocked, nothing can come of
// waiting, and SIGKILL goes at once. A job that handles SIGTERM, at any
// depth, gets its whole grace.

// mayActOnTerm reports whether any of pids can still act on a SIGTERM it
// was sent: it catches it, or holds it blocked to take later. A process
// that exited since the list was read acts on nothing. An error reading a
// process that is still there counts as "may", so as never to cut a grace
// short on a guess.
func mayActOnTerm(pids []int) bool {
	for _, pid := range pids {
		caught, err := catchesTerm(pid)
		if err != nil || caught {
			return true
		}
	}
	return false
}

// catchesTerm reads from /proc whether process pid catches SIGTERM or
// blocks it. A process gone, or a zombie, does neither.
func catchesTerm(pid int) (bool, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if os.IsNotExist(err) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	bit := uint64(1) << (syscall.SIGTERM - 1)
	for line := range strings.SplitSeq(string(b), "\n") {
		key, val, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		val = strings.TrimSpace(val)
		switch key {
		case "State":
			if strings.HasPrefix(val, "Z") {
				return false, nil
			}
		case "SigCgt", "SigBlk":
			mask, err := strconv.ParseUint(val, 16, 64)
			if err != nil {
				return false, fmt.Errorf("process %d: %s %q", pid, key, val)
			}
			if mask&bit != 0 {
				return true, nil
			}
		}
	}
	return false, nil
}
