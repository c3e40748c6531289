package node

import (
	"runtime"

	"golang.org/x/sys/unix"
)

// hostCPUs is the number of CPUs this node offers.
func hostCPUs() int { return runtime.NumCPU() }

// hostMemory is the memory this node offers: the machine's total.
func hostMemory() uint64 {
	var si unix.Sysinfo_t
	if err := unix.Sysinfo(&si); err != nil {
		return 0
	}
	return uint64(si.Totalram) * uint64(si.Unit)
}
