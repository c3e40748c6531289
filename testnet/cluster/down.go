package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/e31network/e31/exec"
)

// StopDir stops the nodes listed in dir/nodes.json that a detached cluster
// left running: SIGTERM, then SIGKILL after ten seconds. A PID that now
// belongs to some other program is left alone. Then it sweeps what a node
// killed while it ran a job left on the host (SweepLeftovers), so that the
// directory can be deleted.
func StopDir(dir string) (stopped int, err error) {
	b, err := os.ReadFile(filepath.Join(dir, NodesFile))
	if err != nil {
		return 0, fmt.Errorf("no testnet in %s: %w", dir, err)
	}
	var nodes []Node
	if err := json.Unmarshal(b, &nodes); err != nil {
		return 0, fmt.Errorf("read %s: %w", NodesFile, err)
	}
	var live []int
	for _, n := range nodes {
		if isE31d(n.PID) {
			if err := syscall.Kill(n.PID, syscall.SIGTERM); err == nil {
				live = append(live, n.PID)
			}
		}
	}
	deadline := time.Now().Add(10 * time.Second)
	for _, pid := range live {
		for isE31d(pid) && time.Now().Before(deadline) {
			time.Sleep(20 * time.Millisecond)
		}
		if isE31d(pid) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
			for isE31d(pid) {
				time.Sleep(10 * time.Millisecond)
			}
		}
	}
	var errs []error
	for _, n := range nodes {
		if n.Data != "" && !isE31d(n.PID) {
			errs = append(errs, SweepLeftovers(n.Data))
		}
	}
	return len(live), errors.Join(errs...)
}

// SweepLeftovers removes what the node with data directory data left on
// the host if it was killed while it ran a job, as its own restart would:
// the job's container, cgroup and image root (exec.Runner.Sweep), its
// sandbox run directory, and the job's disk, still mounted under the data
// directory. A node stopped cleanly leaves none of them.
func SweepLeftovers(data string) error {
	var errs []error
	runDir := exec.RunDirOf(data)
	if _, err := os.Stat(runDir); err == nil {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		stateRoot, bundleRoot := exec.RunDirRoots(runDir)
		r, err := exec.NewRunner(ctx, exec.RunnerOptions{StateRoot: stateRoot, BundleRoot: bundleRoot})
		if err == nil {
			err = r.Sweep(ctx, func(string) bool { return false })
			// The runtime's run process outlives a killed daemon and
			// exits once its container is swept; until then it may
			// still write under the run directory.
			waitNoProcessNames(ctx, runDir)
		}
		errs = append(errs, err, exec.RemoveRunDir(runDir))
	}
	errs = append(errs, exec.SweepDisks(filepath.Join(data, "leases"), func(string) bool { return false }))
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("sweep what %s left: %w", data, err)
	}
	return nil
}

// waitNoProcessNames waits, until ctx ends, for no process's command line
// to name path.
func waitNoProcessNames(ctx context.Context, path string) {
	for processNames(path) {
		select {
		case <-ctx.Done():
			return
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// processNames reports whether some live process's command line names
// path (a zombie's is empty).
func processNames(path string) bool {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return false
	}
	for _, e := range entries {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		cmd, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err == nil && strings.Contains(string(cmd), path) {
			return true
		}
	}
	return false
}

// isE31d reports whether pid is a live e31d process (not a zombie).
func isE31d(pid int) bool {
	if pid <= 0 {
		return false
	}
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	// The state follows the parenthesised command name.
	s := string(stat)
	i := strings.LastIndexByte(s, ')')
	if i < 0 || i+2 >= len(s) || s[i+2] == 'Z' {
		return false
	}
	cmdline, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
	if err != nil {
		return false
	}
	argv0, _, _ := strings.Cut(string(cmdline), "\x00")
	return filepath.Base(argv0) == "e31d"
}
