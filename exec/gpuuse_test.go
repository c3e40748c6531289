package exec

import (
	"errors"
	"io/fs"
	"math"
	"os"
	"testing"
)

func TestSandboxCgroup(t *testing.T) {
	cid := ContainerID("L1")
	parent := cgroupParentFor("/run/e31/abc/runc")
	cases := []struct {
		name, content string
		want          bool
	}{
		{"v2 job", "0::" + parent + "/" + cid + "\n", true},
		{"v2 job without a runner parent", "0::/e31/" + cid + "\n", true},
		{"v2 job, cgroup removed", "0::" + parent + "/" + cid + " (deleted)\n", true},
		{"v2 host process", "0::/user.slice/user-1000.slice/session-2.scope\n", false},
		{"v2 the daemon", "0::/system.slice/e31d.service\n", false},
		{"v2 a runner's parent itself", "0::" + parent + "\n", false},
		{"v2 a look-alike outside /e31", "0::/e31x/" + cid + "\n", false},
		{"v2 a look-alike under another root", "0::/docker/e31-abc\n", false},
		{"v2 root", "0::/\n", false},
		{"v1 job", "12:pids:" + parent + "/" + cid + "\n" +
			"11:memory:" + parent + "/" + cid + "\n" +
			"10:devices:" + parent + "/" + cid + "\n" +
			"4:cpu,cpuacct:" + parent + "/" + cid + "\n" +
			"1:name=systemd:/user.slice/user-0.slice/session-1.scope\n", true},
		{"v1 host process", "12:pids:/user.slice/user-1000.slice\n" +
			"11:memory:/user.slice/user-1000.slice\n" +
			"1:name=systemd:/user.slice/user-1000.slice/session-2.scope\n", false},
		// A hybrid host: v1 controllers and the controller-less v2
		// hierarchy; the runtime need not have placed the job in the last.
		{"hybrid job", "11:memory:" + parent + "/" + cid + "\n" +
			"1:name=systemd:/user.slice/user-0.slice/session-1.scope\n" +
			"0::/user.slice/user-0.slice/session-1.scope\n", true},
		{"hybrid host process", "11:memory:/system.slice/Xorg.service\n" +
			"0::/system.slice/Xorg.service\n", false},
		{"empty", "", false},
		{"garbage", "not a cgroup file\n", false},
		{"no trailing newline", "0::" + parent + "/" + cid, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := SandboxCgroup(c.content); got != c.want {
				t.Errorf("SandboxCgroup(%q) = %v, want %v", c.content, got, c.want)
			}
		})
	}
}

// The sandbox test and the runner agree on where a container's cgroup is.
func TestSandboxCgroupMatchesRunnerPath(t *testing.T) {
	c := cgroupLayout{parent: cgroupParentFor("/some/state/root")}
	if p := c.path(ContainerID("lease-1")); !SandboxCgroup("0::" + p + "\n") {
		t.Errorf("the runner's own path %s is not recognised", p)
	}
	if p := (cgroupLayout{}).path(ContainerID("lease-1")); !SandboxCgroup("0::" + p + "\n") {
		t.Errorf("the path %s of a runner without a parent is not recognised", p)
	}
}

func TestIsSandboxPID(t *testing.T) {
	in, err := IsSandboxPID(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if in {
		t.Error("the test process is said to be in a job sandbox")
	}
	// No host has this many PIDs (pid_max is at most 2^22).
	if _, err := IsSandboxPID(math.MaxInt32); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a PID that does not exist: err = %v, want fs.ErrNotExist", err)
	}
}

// A desktop's display server and compositor hold its GPU without its
// owner working on it; anything else is the owner's.
func TestDisplayProcess(t *testing.T) {
	for comm, want := range map[string]bool{"Xorg\n": true, "gnome-shell\n": true, "Xwayland": true,
		"python3\n": false, "steam\n": false, "": false, "Xorgx\n": false} {
		if got := DisplayProcess(comm); got != want {
			t.Errorf("DisplayProcess(%q) = %v, want %v", comm, got, want)
		}
	}
	// This test's own process is neither a sandbox's nor the display's.
	if not, err := NotOwnersUse(os.Getpid()); err != nil || not {
		t.Fatalf("NotOwnersUse(self) = %v, %v; want the owner's use", not, err)
	}
}
