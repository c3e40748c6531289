package exec

import (
	"fmt"
	"os"
	"strconv"
	"strings"
)

// GPUUse is what one sample saw on one GPU of this machine: whether
// anything but the provider's jobs is using it. A provider that gives its
// machine back to its owner when the owner starts using a GPU (node/reclaim)
// decides from a list of these; exec/nvidia reads them from NVML and
// [SimUse] from files for simulated GPUs.
type GPUUse struct {
	// Index is the GPU's position on this machine, as in [GPU].Index.
	Index int
	// UUID names the GPU as [GPU].UUID does, so that the GPU can be
	// matched with the lease that holds it.
	UUID string
	// ForeignPIDs are the processes on this GPU that no job sandbox holds,
	// as the host numbers them. A PID of 0 stands for a process whose PID
	// is not known (a simulated GPU marked busy without one).
	ForeignPIDs []int
	// Utilization is the percentage of the last sample period during
	// which a kernel ran on the GPU, whoever ran it; -1 when not known.
	Utilization int
}

// UtilizationUnknown is [GPUUse].Utilization when the GPU does not say.
const UtilizationUnknown = -1

// IsSandboxPID reports whether the host process pid belongs to a job
// sandbox of any runner on this host: whether /proc/PID/cgroup places it
// under the cgroup the runners make their containers in. A process that
// has ended gives an error wrapping fs.ErrNotExist.
//
// Any runner's, not only this daemon's: several daemons of a test network
// share a host, and a neighbour's job is no more the owner's than this
// node's own. The paths are those seen from the daemon's cgroup
// namespace, the one its runtime created the containers from, so a job
// in a cgroup namespace of its own is still found.
func IsSandboxPID(pid int) (bool, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cgroup")
	if err != nil {
		return false, fmt.Errorf("process %d: %w", pid, err)
	}
	return SandboxCgroup(string(b)), nil
}

// SandboxCgroup reports whether the text of a /proc/PID/cgroup file, in
// the cgroup v1 form ("4:memory:/e31/…", a line per hierarchy), the v2
// form ("0::/e31/…") or a hybrid of both, places the process in a job
// sandbox's cgroup: /e31/<runner>/e31-<lease>/… (cgroupParentFor and
// ContainerID). One hierarchy is enough: the runtime puts a container in
// every hierarchy it manages, but not always in every one mounted (a
// named v1 hierarchy, or the controller-less v2 one of a hybrid host), and
// nothing but a runtime places a process under /e31.
func SandboxCgroup(content string) bool {
	for line := range strings.SplitSeq(content, "\n") {
		// hierarchy-ID:controllers:path; the path may itself hold colons.
		_, rest, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		_, path, ok := strings.Cut(rest, ":")
		if !ok {
			continue
		}
		if sandboxCgroupPath(strings.TrimSuffix(path, " (deleted)")) {
			return true
		}
	}
	return false
}

// sandboxCgroupPath reports whether a cgroup path is a container's
// cgroup, or one below it, under cgroupRoot: a component after the root
// that starts "e31-". The runner's parent (hex digits) never does, and a
// runner without one (cgroupLayout.path) puts the container right under
// the root.
func sandboxCgroupPath(path string) bool {
	rest, ok := strings.CutPrefix(path, cgroupRoot+"/")
	if !ok {
		return false
	}
	for part := range strings.SplitSeq(rest, "/") {
		if strings.HasPrefix(part, "e31-") {
			return true
		}
	}
	return false
}

// displayStack names the programs that hold a desktop's GPU all day
// without anyone using it for work: display servers and compositors. A
// process of theirs on a GPU is not its owner starting to use it, or a
// workstation with a screen on its GPU would never lend it.
func displayStack() []string {
	return []string{"Xorg", "X", "Xwayland", "gnome-shell", "kwin_wayland", "kwin_x11", "plasmashell",
		"mutter", "sway", "weston", "Hyprland", "cinnamon", "xfwm4", "compiz", "gdm-x-session", "sddm-greeter"}
}

// DisplayProcess reports whether a /proc/PID/comm text names a display
// server or compositor (displayStack).
func DisplayProcess(comm string) bool {
	comm = strings.TrimSpace(comm)
	for _, name := range displayStack() {
		if comm == name {
			return true
		}
	}
	return false
}

// NotOwnersUse reports whether host process pid on a GPU is not its owner
// using it: a job sandbox's process (IsSandboxPID), or the desktop's
// display stack (DisplayProcess). It is the check --reclaim-on-use makes
// of every process NVML lists.
func NotOwnersUse(pid int) (bool, error) {
	if comm, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid)); err == nil && DisplayProcess(string(comm)) {
		return true, nil
	}
	return IsSandboxPID(pid)
}
