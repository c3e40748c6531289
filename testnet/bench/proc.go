package bench

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// VmRSS reads a process's resident set size in KiB.
func VmRSS(pid int) (int64, error) { return ProcStatusKiB(pid, "VmRSS:") }

// ProcStatusKiB reads one KiB figure of a process's /proc status, such as
// "VmRSS:" or "RssAnon:".
func ProcStatusKiB(pid int, field string) (int64, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0, fmt.Errorf("read memory of pid %d: %w", pid, err)
	}
	for line := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(line, field); ok {
			f := strings.Fields(v)
			if len(f) == 2 && f[1] == "kB" {
				return strconv.ParseInt(f[0], 10, 64)
			}
		}
	}
	return 0, fmt.Errorf("pid %d: no %s in /proc status", pid, field)
}

// ProcCPU is a process's own CPU and that of its children it waited for.
type ProcCPU struct {
	Self, Children time.Duration
}

// clockTick is the unit of /proc/PID/stat's times (USER_HZ, 100 on every
// Linux architecture Go supports).
const clockTick = 10 * time.Millisecond

// ReadProcCPU reads utime, stime, cutime and cstime of pid.
func ReadProcCPU(pid int) (ProcCPU, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return ProcCPU{}, err
	}
	return parseProcStat(string(b))
}

func parseProcStat(s string) (ProcCPU, error) {
	// The command name is in parentheses and may hold spaces; fields
	// count from the state after it (field 3 of proc(5)).
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return ProcCPU{}, fmt.Errorf("malformed /proc stat: %.40q", s)
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 15 {
		return ProcCPU{}, fmt.Errorf("short /proc stat: %.40q", s)
	}
	var t [4]int64
	for k := range t {
		v, err := strconv.ParseInt(f[11+k], 10, 64)
		if err != nil {
			return ProcCPU{}, fmt.Errorf("/proc stat field %d: %w", 14+k, err)
		}
		t[k] = v
	}
	return ProcCPU{Self: time.Duration(t[0]+t[1]) * clockTick, Children: time.Duration(t[2]+t[3]) * clockTick}, nil
}
