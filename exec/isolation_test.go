package exec

import (
	"context"
	"errors"
	"fmt"
	"os"
	osexec "os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"github.com/e31network/e31/testnet/poll"
	"golang.org/x/sys/unix"
)

// The isolation suite runs this test binary inside a sandbox as a probe: with
// probeEnv set to a probe's name it makes that one call and prints what the
// kernel answered ("ok", or the errno's name), and with it set to "all" it
// runs each probe in a child process of its own and prints one line per
// probe, "name result", where a child killed by a signal reads
// "killed:<signal>". A call the filter kills must not take the other probes
// with it, hence the children.
const probeEnv = "E31_SANDBOX_PROBE"

func TestMain(m *testing.M) {
	if name := os.Getenv(probeEnv); name != "" {
		os.Exit(runProbe(name))
	}
	os.Exit(m.Run())
}

// socketProbes are the socket(2) and socketpair(2) calls probed: family,
// type and protocol.
var socketProbes = map[string][3]int{
	"socket AF_UNIX":       {unix.AF_UNIX, unix.SOCK_STREAM, 0},
	"socket AF_INET":       {unix.AF_INET, unix.SOCK_STREAM, 0},
	"socket AF_INET6":      {unix.AF_INET6, unix.SOCK_DGRAM, 0},
	"socket AF_NETLINK":    {unix.AF_NETLINK, unix.SOCK_RAW, unix.NETLINK_ROUTE},
	"socket AF_ALG":        {unix.AF_ALG, unix.SOCK_SEQPACKET, 0},
	"socket AF_VSOCK":      {unix.AF_VSOCK, unix.SOCK_STREAM, 0},
	"socket AF_KEY":        {unix.AF_KEY, unix.SOCK_RAW, 2 /* PF_KEY_V2 */},
	"socket AF_PACKET":     {unix.AF_PACKET, unix.SOCK_RAW, 0x0300 /* htons(ETH_P_ALL) */},
	"socket AF_XDP":        {unix.AF_XDP, unix.SOCK_RAW, 0},
	"socket AF_TIPC":       {unix.AF_TIPC, unix.SOCK_RDM, 0},
	"socket AF_BLUETOOTH":  {unix.AF_BLUETOOTH, unix.SOCK_RAW, 0},
	"socketpair AF_UNIX":   {unix.AF_UNIX, unix.SOCK_STREAM, 0},
	"socketpair AF_ALG":    {unix.AF_ALG, unix.SOCK_SEQPACKET, 0},
	"socketpair AF_VSOCK":  {unix.AF_VSOCK, unix.SOCK_STREAM, 0},
	"socketpair AF_INET":   {unix.AF_INET, unix.SOCK_STREAM, 0},
	"socketpair AF_PACKET": {unix.AF_PACKET, unix.SOCK_RAW, 0},
}

// compatProbes are calls in the compat ABIs of amd64, which the filter
// leaves out: socketcall(SYS_SOCKET) for AF_INET (a family the job may
// use, so that only the ABI can refuse it) and getpid through the i386
// gate, and socket(AF_INET) by its x32 number.
var compatProbes = []string{"i386 socketcall AF_INET", "i386 getpid", "x32 socket AF_INET"}

// probeNames are every probe "all" runs.
func probeNames() []string {
	names := slices.Sorted(func(yield func(string) bool) {
		for n := range socketProbes {
			if !yield(n) {
				return
			}
		}
	})
	if runtime.GOARCH == "amd64" {
		names = append(names, compatProbes...)
	}
	return names
}

func runProbe(name string) int {
	if name == "all" {
		self, err := os.Executable()
		if err != nil {
			fmt.Println("probe:", err)
			return 1
		}
		for _, n := range probeNames() {
			cmd := osexec.Command(self)
			cmd.Env = append(os.Environ(), probeEnv+"="+n)
			out, err := cmd.Output()
			result := strings.TrimSpace(string(out))
			var exit *osexec.ExitError
			if errors.As(err, &exit) {
				if ws, ok := exit.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
					result = "killed:" + unix.SignalName(ws.Signal())
				}
			}
			fmt.Printf("%s\t%s\n", n, result)
		}
		return 0
	}
	fmt.Println(probeCall(name))
	return 0
}

func probeResult(err error) string {
	var errno syscall.Errno
	switch {
	case err == nil:
		return "ok"
	case errors.As(err, &errno):
		return unix.ErrnoName(errno)
	default:
		return err.Error()
	}
}

// probeCall makes the call a probe names and says what the kernel
// answered.
func probeCall(name string) string {
	if slices.Contains(compatProbes, name) {
		return compatCall(name)
	}
	p, ok := socketProbes[name]
	if !ok {
		return "no probe " + name
	}
	if strings.HasPrefix(name, "socketpair ") {
		fds, err := unix.Socketpair(p[0], p[1], p[2])
		if err == nil {
			unix.Close(fds[0])
			unix.Close(fds[1])
		}
		return probeResult(err)
	}
	fd, err := unix.Socket(p[0], p[1], p[2])
	if err == nil {
		unix.Close(fd)
	}
	return probeResult(err)
}

// compatCall makes a call of compatProbes in a child forked for it. The
// filter's action for an architecture it does not list kills the calling
// thread: a child of one thread then dies of SIGSYS, where a thread of this
// Go program would vanish unseen. The call's code is made ready before the
// fork, so that the child runs nothing of Go's runtime: it makes the call
// and exits with its errno.
func compatCall(name string) string {
	var call func() int32
	switch name {
	case "i386 socketcall AF_INET":
		call = i386Call(102 /* socketcall */, 1 /* SYS_SOCKET */, []uint32{unix.AF_INET, unix.SOCK_STREAM, 0})
	case "i386 getpid":
		call = i386Call(20 /* getpid */, 0, nil)
	case "x32 socket AF_INET":
		call = x32Socket
	}
	if call == nil {
		return "cannot make " + name
	}
	pid, _, errno := unix.RawSyscall(unix.SYS_FORK, 0, 0, 0)
	if errno != 0 {
		return "fork: " + errno.Error()
	}
	if pid == 0 {
		code := uintptr(0)
		if r := call(); r < 0 {
			code = uintptr(-r)
		}
		unix.RawSyscall(unix.SYS_EXIT_GROUP, code, 0, 0)
	}
	var ws unix.WaitStatus
	if _, err := unix.Wait4(int(pid), &ws, 0, nil); err != nil {
		return "wait: " + err.Error()
	}
	switch {
	case ws.Signaled():
		return "killed:" + unix.SignalName(ws.Signal())
	case ws.ExitStatus() == 0:
		return "ok"
	default:
		return unix.ErrnoName(syscall.Errno(ws.ExitStatus()))
	}
}

// x32Socket is socket(AF_INET, SOCK_STREAM) by its number in the x32 ABI,
// the amd64 one with bit 30 set.
func x32Socket() int32 {
	const x32 = 0x40000000
	fd, _, errno := unix.RawSyscall(x32|unix.SYS_SOCKET, unix.AF_INET, unix.SOCK_STREAM, 0)
	if errno != 0 {
		return -int32(errno)
	}
	return int32(fd)
}

// i386Call returns a function that makes system call nr of the i386 ABI
// through its gate, int 0x80, which a 64-bit process may use: ebx is arg,
// ecx points to args. The code is written into a page below 4 GiB, where
// the 32-bit ABI can address the arguments, and called as a Go function
// whose result, in eax, is the call's (a negative errno on failure); nil
// where the page cannot be made.
func i386Call(nr, arg uint32, args []uint32) func() int32 {
	page, err := unix.Mmap(-1, 0, unix.Getpagesize(), unix.PROT_READ|unix.PROT_WRITE|unix.PROT_EXEC,
		unix.MAP_PRIVATE|unix.MAP_ANONYMOUS|unix.MAP_32BIT)
	if err != nil {
		return nil
	}
	const argsAt = 64
	for i, a := range args {
		*(*uint32)(unsafe.Pointer(&page[argsAt+4*i])) = a
	}
	addr := uint32(uintptr(unsafe.Pointer(&page[argsAt])))
	code := []byte{0xb8, 0, 0, 0, 0, 0xbb, 0, 0, 0, 0, 0xb9, 0, 0, 0, 0, 0xcd, 0x80, 0xc3} // mov eax; mov ebx; mov ecx; int 0x80; ret
	for i, v := range []uint32{nr, arg, addr} {
		*(*uint32)(unsafe.Pointer(&code[1+5*i])) = v
	}
	copy(page, code)
	entry := uintptr(unsafe.Pointer(&page[0]))
	fv := &entry // a func value points to a word holding the code's address
	return *(*func() int32)(unsafe.Pointer(&fv))
}

// runProbes runs every probe in a sandbox, and on the host for comparison,
// and returns each one's result in both.
func runProbes(t *testing.T, r *Runner) (sandbox, host map[string]string) {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := osexec.Command(self)
	cmd.Env = append(os.Environ(), probeEnv+"=all")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("probes on the host: %v\n%s", err, out)
	}
	host = parseProbes(t, string(out))

	s := testSpec(t, "", "")
	s.Inputs = []Mount{{Source: self, Target: "/probe/exec.test"}}
	s.Command = []string{"/probe/exec.test"}
	s.Env = map[string]string{probeEnv: "all"}
	res := runJob(t, context.Background(), r, s)
	wantOutcome(t, res, Completed, ByJob)
	return parseProbes(t, readFile(t, res.Stdout)), host
}

func parseProbes(t *testing.T, out string) map[string]string {
	t.Helper()
	got := map[string]string{}
	for line := range strings.Lines(out) {
		name, result, ok := strings.Cut(strings.TrimSpace(line), "\t")
		if !ok {
			t.Fatalf("probe output %q", out)
		}
		got[name] = result
	}
	if len(got) != len(probeNames()) {
		t.Fatalf("%d probe results, want %d: %q", len(got), len(probeNames()), out)
	}
	return got
}

// TestSandboxRefusesKernelSurface runs the probes in a real sandbox: each
// family the filter leaves out is refused with EPERM before the kernel
// looks at it (on the host the same call succeeds, or fails with the
// kernel's own error where the family is not built), the families a job
// needs work as they do on the host, and no call in a compat ABI gets
// through, socketcall included.
func TestSandboxRefusesKernelSurface(t *testing.T) {
	r := newTestRunner(t)
	sandbox, host := runProbes(t, r)
	for _, name := range probeNames() {
		t.Logf("%-26s sandbox %-16s host %s", name, sandbox[name], host[name])
	}
	allowed := []string{"socket AF_UNIX", "socket AF_INET", "socket AF_INET6", "socket AF_NETLINK", "socketpair AF_UNIX", "socketpair AF_INET"}
	for name := range socketProbes {
		switch {
		case slices.Contains(allowed, name):
			// socketpair(AF_INET) is the kernel's own EOPNOTSUPP.
			if sandbox[name] != host[name] {
				t.Errorf("%s: %s in the sandbox, %s on the host", name, sandbox[name], host[name])
			}
		case sandbox[name] != "EPERM":
			t.Errorf("%s: %s in the sandbox, want EPERM", name, sandbox[name])
		}
	}
	if runtime.GOARCH != "amd64" {
		return
	}
	for _, name := range compatProbes {
		// Killed: the runtime's action for an architecture the filter
		// does not list.
		if got := sandbox[name]; got != "killed:SIGSYS" {
			t.Errorf("%s: %s in the sandbox (%s on the host), want the process killed", name, got, host[name])
		}
	}
	if host["i386 socketcall AF_INET"] != "ok" || host["i386 getpid"] != "ok" {
		t.Logf("this kernel has no i386 ABI to refuse (host: %s, %s)", host["i386 socketcall AF_INET"], host["i386 getpid"])
	}
}

// TestSandboxMasksHost: a job reads nothing of /proc/diskstats and of the
// machine's DMI tables, whether or not the host has them.
func TestSandboxMasksHost(t *testing.T) {
	r := newTestRunner(t)
	script := `set -e
test ! -s /proc/diskstats && test -z "$(cat /proc/diskstats)"
for d in /sys/class/dmi /sys/devices/virtual/dmi /sys/firmware /sys/firmware/dmi; do
	if [ -e "$d" ] && [ -n "$(ls -A "$d")" ]; then echo "$d lists $(ls -A "$d")"; exit 1; fi
done
if cat /sys/class/dmi/id/product_uuid /sys/class/dmi/id/board_serial 2>/dev/null; then echo "read DMI"; exit 1; fi`
	res := runJob(t, context.Background(), r, testSpec(t, "", script))
	wantOutcome(t, res, Completed, ByJob)
	if b, err := os.ReadFile("/proc/diskstats"); err != nil || len(b) == 0 {
		t.Logf("the host has no /proc/diskstats to hide (%v)", err)
	}
}

// TestJobsHaveUIDsOfTheirOwn: two jobs without an image running at once
// run as two host uids, each named "job" inside, from the runner's range;
// what each writes is its uid's and the daemon reads it; each uid goes
// back when its job ends.
func TestJobsHaveUIDsOfTheirOwn(t *testing.T) {
	r := newTestRunner(t)
	gate := t.TempDir() // read-only in the jobs: the test opens it
	script := `set -e
id -u > /out/uid
id -un > /out/name
while [ ! -e /gate/go ]; do sleep 0.02; done`
	jobs := make([]Spec, 2)
	done := make(chan Result, len(jobs))
	for i := range jobs {
		s := testSpec(t, "", script)
		s.ID = fmt.Sprintf("%s-%d", s.ID, i)
		s.Inputs = []Mount{{Source: gate, Target: "/gate"}}
		jobs[i] = s
		go func() {
			res, err := r.Run(context.Background(), s)
			if err != nil {
				t.Errorf("Run: %v", err)
			}
			done <- res
		}()
	}
	uids := map[string]bool{}
	poll.Until(t, "both jobs to say who they are", 90*time.Second, func() bool {
		for _, s := range jobs {
			if b, err := os.ReadFile(filepath.Join(s.Output.Source, "name")); err != nil || len(b) == 0 {
				return false
			}
		}
		return true
	})
	for _, s := range jobs {
		uid := strings.TrimSpace(readFile(t, filepath.Join(s.Output.Source, "uid")))
		n, err := strconv.ParseUint(uid, 10, 32)
		if err != nil || n < uint64(r.uids.base) || n >= uint64(r.uids.base)+jobUIDCount {
			t.Errorf("job %s ran as %q, not a uid of %d-%d", s.ID, uid, r.uids.base, r.uids.base+jobUIDCount-1)
		}
		if name := strings.TrimSpace(readFile(t, filepath.Join(s.Output.Source, "name"))); name != "job" {
			t.Errorf("job %s is called %q", s.ID, name)
		}
		var st unix.Stat_t
		must(t, unix.Stat(filepath.Join(s.Output.Source, "uid"), &st))
		if strconv.FormatUint(uint64(st.Uid), 10) != uid || st.Gid != st.Uid {
			t.Errorf("job %s's output is %d:%d's, not its own %s", s.ID, st.Uid, st.Gid, uid)
		}
		if claimed, ok := r.uids.owned(r.host.cgroups.path(ContainerID(s.ID))); !ok || strconv.FormatUint(uint64(claimed), 10) != uid {
			t.Errorf("job %s runs as %s, claimed %d (%v)", s.ID, uid, claimed, ok)
		}
		uids[uid] = true
	}
	if len(uids) != len(jobs) {
		t.Errorf("two jobs share a uid: %v", uids)
	}
	must(t, os.WriteFile(filepath.Join(gate, "go"), nil, 0o644))
	for range jobs {
		wantOutcome(t, <-done, Completed, ByJob)
	}
	for _, s := range jobs {
		assertGone(t, r, s)
		if uid, ok := r.uids.owned(r.host.cgroups.path(ContainerID(s.ID))); ok {
			t.Errorf("job %s ended and still holds uid %d", s.ID, uid)
		}
	}
}

// TestDiskIOLimited: a job writing to its own disk with direct I/O, past
// the page cache, goes no faster than the runner's limit, which its cgroup
// shows on its disk's device.
func TestDiskIOLimited(t *testing.T) {
	r := newTestRunner(t)
	needDisks(t)
	if !r.host.cgroups.io.throttle {
		t.Skip("this host's cgroups cannot limit block I/O")
	}
	const rate = 8 << 20
	r.diskIO = diskIOLimit{bandwidth: rate, iops: 1000}
	script := `set -e
cat /sys/fs/cgroup/blkio/blkio.throttle.write_bps_device /sys/fs/cgroup/io.max 2>/dev/null || true
start=$(date +%s%N)
dd if=/dev/zero of=/out/direct bs=1M count=24 oflag=direct 2>/dev/null
end=$(date +%s%N)
echo "ns $((end - start))"`
	s := onDisk(t, testSpec(t, "", script), 64<<20)
	dev, err := diskDevice(s.Disk.Path)
	if err != nil {
		t.Fatal(err)
	}
	res := runJob(t, context.Background(), r, s)
	wantOutcome(t, res, Completed, ByJob)
	out := readFile(t, res.Stdout)
	if want := fmt.Sprintf("%d:%d", dev.Major, dev.Minor); !strings.Contains(out, want+" "+strconv.Itoa(rate)) && !strings.Contains(out, want+" rbps="+strconv.Itoa(rate)) {
		t.Errorf("the job's cgroup does not limit %s to %d bytes/s:\n%s", want, rate, out)
	}
	var ns int64
	if _, err := fmt.Sscanf(out[strings.LastIndex(out, "ns "):], "ns %d", &ns); err != nil {
		t.Fatalf("no time in %q", out)
	}
	// 24 MiB at 8 MiB/s: 3s. Half of it would be twice the rate.
	if took := time.Duration(ns); took < 1500*time.Millisecond {
		t.Errorf("24 MiB of direct writes took %v: faster than %d bytes/s", took, rate)
	} else {
		t.Logf("24 MiB of direct writes took %v at a limit of %d bytes/s", took, rate)
	}
}
