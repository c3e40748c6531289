package cluster

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// StopDir stops the nodes listed in dir/nodes.json that a detached cluster
// left running: SIGTERM, then SIGKILL after ten seconds. A PID that now
// belongs to some other program is left alone.
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
	return len(live), nil
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
