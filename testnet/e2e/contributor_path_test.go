package e2e

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/e31network/e31/ledger"
	"github.com/e31network/e31/node/api"
	"github.com/e31network/e31/testnet/cluster"
	"github.com/e31network/e31/testnet/poll"
)

// TestContributorPathFromTheDocs follows docs/contributing-gpus.md as a new
// contributor does: install, doctor, join, take work, drain, undrain, stop.
// The commands come from the doc itself (its first sh block, the path, and
// the drain block), so the test breaks when the doc changes; every command
// it runs is one the doc lists, with the doc's program, subcommand and
// flags, in the path's order.
//
// Stand-ins for what a test cannot do to its machine:
//   - go install: the e31d and e31 this package built (bin).
//   - apt-get install -y runc: runc is installed already; runc --version
//     must work, as the doc's step would leave it.
//   - /etc/e31/e31d.toml: cmd/e31d/dist/e31d.toml copied to a temporary
//     folder and edited only where a test must: the data dir in it, listen
//     on a loopback port of the kernel's choosing, nat off, and the
//     network and bootstrap peer of a running test cluster.
//   - systemctl enable --now e31d: the unit's ExecStart line
//     (cmd/e31d/dist/e31d.service) run as a child process, with flags a
//     test network needs after it (flags win over the file): one simulated
//     RTX4090, the CPUs and memory the cluster's simulated GPUs come with,
//     the disk they count as free (--debug-disk-free, whatever this
//     machine has) and the cluster's heartbeat.
//   - journalctl -u e31d -f: the child's log file.
//   - /var/lib/e31/e31.sock: the API socket in the temporary data dir.
//   - systemctl stop e31d: SIGTERM, after which the daemon exits 0.
//
// The job is submitted from the cluster's submitter node and asks for the
// RTX4090 model, which only the new node offers.
func TestContributorPathFromTheDocs(t *testing.T) {
	doc, err := os.ReadFile("../../docs/contributing-gpus.md")
	if err != nil {
		t.Fatal(err)
	}
	path := shBlocks(string(doc))
	if len(path) == 0 {
		t.Fatal("docs/contributing-gpus.md has no sh block")
	}
	var drainBlock []string
	for _, b := range path[1:] {
		if len(b) > 0 && strings.HasPrefix(b[0], "e31 drain") {
			drainBlock = b
		}
	}
	if drainBlock == nil {
		t.Fatal("docs/contributing-gpus.md has no sh block that starts with e31 drain")
	}
	steps := &docSteps{t: t, path: path[0], drain: drainBlock, last: -1}

	c := start(t, cluster.Options{
		N:             2,
		SimGPUsByNode: []string{"", "1xH100:80GiB"},
		Heartbeat:     time.Second,
	})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	sub := c.Nodes[0]

	// 1. Install.
	steps.pathWith("go install ./cmd/e31d ./cmd/e31")
	steps.path1("apt-get install -y runc")
	if out, err := exec.CommandContext(ctx, "runc", "--version").CombinedOutput(); err != nil || !strings.HasPrefix(string(out), "runc version") {
		t.Fatalf("runc --version: %v\n%s", err, out)
	}

	// 2. Configure.
	const docConfig, docSock = "/etc/e31/e31d.toml", "/var/lib/e31/e31.sock"
	cp := steps.path1("install -D -m 0644 cmd/e31d/dist/e31d.toml " + docConfig)
	if !strings.HasPrefix(cp, "install") {
		t.Fatalf("configure step %q", cp)
	}
	steps.path1("$EDITOR " + docConfig)
	dir := t.TempDir()
	data := filepath.Join(dir, "e31")
	config := filepath.Join(dir, "e31d.toml")
	sock := filepath.Join(data, "e31.sock")
	example, err := os.ReadFile("../../cmd/e31d/dist/e31d.toml")
	if err != nil {
		t.Fatal(err)
	}
	edited := editTOML(t, string(example), map[string]string{
		"data":      quoteTOML(data),
		"listen":    "[" + quoteTOML("/ip4/127.0.0.1/tcp/0") + "]",
		"nat":       quoteTOML("off"),
		"network":   quoteTOML(sub.Network),
		"bootstrap": "[" + quoteTOML(sub.Addrs[0]) + "]",
	})
	if err := os.WriteFile(config, []byte(edited), 0o644); err != nil {
		t.Fatal(err)
	}
	sub1 := func(argv []string) []string {
		out := slices.Clone(argv)
		for i, a := range out {
			switch a {
			case docConfig:
				out[i] = config
			case docSock:
				out[i] = sock
			}
		}
		switch out[0] {
		case "e31d":
			out[0] = bin.E31d
		case "e31":
			out[0] = bin.E31
		}
		return out
	}

	// 3. Doctor: every check passes but those a test machine cannot, which
	// are the data dir's free disk (the daemon below is told to count a
	// terabyte) and NTP.
	canFailHere := []string{"disk", "clock"}
	for _, want := range []string{"e31d doctor --config " + docConfig, "e31d doctor --config " + docConfig + " --gpu-job"} {
		argv := sub1(steps.run(steps.path, want))
		out, code := runCmd(t, ctx, append(argv, "--json")...)
		// A failed check also prints an error after the JSON.
		var rep api.DoctorReport
		if err := json.NewDecoder(strings.NewReader(out)).Decode(&rep); err != nil {
			t.Fatalf("%s --json: exit %d, %v\n%s", want, code, err, out)
		}
		failed := 0
		for _, ch := range rep.Checks {
			if ch.Status != api.DoctorFail {
				continue
			}
			failed++
			if !slices.Contains(canFailHere, ch.Name) {
				t.Fatalf("%s: check %s failed: %s", want, ch.Name, ch.Detail)
			}
			t.Logf("%s: %s fails on this machine: %s", want, ch.Name, ch.Detail)
		}
		if (code == 0) != (failed == 0) || len(rep.Checks) == 0 {
			t.Fatalf("%s: exit %d with %d of %d checks failed\n%s", want, code, failed, len(rep.Checks), out)
		}
	}

	// 4. Run it as a service: the unit's ExecStart.
	steps.path1("install -m 0644 cmd/e31d/dist/e31d.service /etc/systemd/system/")
	steps.path1("systemctl daemon-reload && systemctl enable --now e31d")
	unit, err := os.ReadFile("../../cmd/e31d/dist/e31d.service")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^ExecStart=(\S+) --config (\S+)$`).FindStringSubmatch(string(unit))
	if m == nil || filepath.Base(m[1]) != "e31d" || m[2] != docConfig {
		t.Fatalf("the unit's ExecStart is not e31d --config %s: %q", docConfig, m)
	}
	logPath := filepath.Join(dir, "e31d.log")
	logf, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close()
	daemon := exec.Command(bin.E31d, "--config", config,
		"--sim-gpus", "1xRTX4090:24GiB", "--cpus", "64", "--memory", "256GiB",
		"--debug-disk-free", "1TiB", "--heartbeat", "1s")
	daemon.Stdout, daemon.Stderr = logf, logf
	daemon.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := daemon.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- daemon.Wait() }()
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			_ = daemon.Process.Kill()
			<-exited
		}
		if t.Failed() {
			b, _ := os.ReadFile(logPath)
			t.Logf("the contributor's e31d log:\n%s", b)
		}
	})
	logSays := func(s string) bool {
		b, _ := os.ReadFile(logPath)
		return strings.Contains(string(b), s)
	}
	steps.path1("journalctl -u e31d -f")
	poll.Until(t, `the daemon's log to say "container runtime ready"`, 90*time.Second, func() bool { return logSays("container runtime ready") })
	poll.Until(t, `the daemon's log to say "e31d ready"`, 90*time.Second, func() bool { return logSays("e31d ready") })

	// 5. What the node is, and what the GPUs earn.
	e31 := func(doc []string, want string, extra ...string) string {
		t.Helper()
		argv := sub1(steps.run(doc, want))
		out, code := runCmd(t, ctx, append(argv, extra...)...)
		if code != 0 {
			t.Fatalf("%s: exit %d\n%s", want, code, out)
		}
		return out
	}
	onDocSock := "e31 --api " + docSock + " "
	idOut := e31(steps.path, onDocSock+"id")
	var self api.ID
	if err := json.Unmarshal([]byte(e31(steps.path, onDocSock+"id", "--json")), &self); err != nil {
		t.Fatal(err)
	}
	if self.PeerID == "" || !strings.Contains(idOut, self.PeerID) {
		t.Fatalf("e31 id does not show the peer ID %q:\n%s", self.PeerID, idOut)
	}
	poll.Until(t, "e31 nodes to list this node among the providers", 60*time.Second, func() bool {
		return strings.Contains(e31(steps.path, onDocSock+"nodes"), self.PeerID)
	})

	// Take work: a job only this node can hold, from the submitter, once
	// the submitter's view holds this node's offer (else submit warns
	// that no offer could hold the job).
	poll.Until(t, "the submitter to see this node's offer", 60*time.Second, func() bool {
		nodes, err := sub.Client().Nodes(ctx)
		return err == nil && slices.ContainsFunc(nodes, func(n api.Node) bool { return n.PeerID == self.PeerID })
	})
	// It runs until the submitter withdraws it, so that e31 leases is
	// read while it runs whatever the machine's load.
	out, code := runE31(t, ctx, sub.API, "submit", "--json", "--gpus", "1", "--gpu-model", "RTX4090", "--limit", "15m",
		"--", "sh", "-c", "sleep 900")
	var job api.Job
	if code != 0 || json.Unmarshal([]byte(out), &job) != nil || job.ID == "" {
		t.Fatalf("e31 submit on the submitter: exit %d\n%s", code, out)
	}
	poll.Until(t, "e31 leases to show the job running", 90*time.Second, func() bool {
		var ls []api.Lease
		if json.Unmarshal([]byte(e31(steps.path, onDocSock+"leases", "--json")), &ls) != nil {
			return false
		}
		return slices.ContainsFunc(ls, func(l api.Lease) bool {
			return l.Job == job.ID && l.Submitter == sub.PeerID && l.Phase == "running"
		})
	})
	if out := e31(steps.path, onDocSock+"leases"); !strings.Contains(out, job.ID) {
		t.Fatalf("e31 leases does not list job %s while it runs:\n%s", job.ID, out)
	}
	if out, code := runE31(t, ctx, sub.API, "withdraw", job.ID); code != 0 {
		t.Fatalf("e31 withdraw %s on the submitter: exit %d\n%s", job.ID, code, out)
	}
	done := waitJob(t, sub.Client(), job.ID, 2*time.Minute, "the job to end", func(j api.Job) bool { return j.State.Terminal() })
	if done.Outcome != "withdrawn" || done.Provider != self.PeerID {
		t.Fatalf("the job ended %s on %s, want withdrawn on the contributor's node %s", done.Outcome, done.Provider, self.PeerID)
	}

	// Drain, and undrain: the drain block is a list to choose from, so
	// only that each command is one it lists is checked, not its order.
	if out := e31(drainBlockOn(steps.drain, docSock), onDocSock+"drain"); !strings.Contains(out, "graceful") {
		t.Fatalf("e31 drain:\n%s", out)
	}
	if out := e31(drainBlockOn(steps.drain, docSock), onDocSock+"id"); !strings.Contains(out, "drained") {
		t.Fatalf("e31 id does not say the node is drained:\n%s", out)
	}
	e31(drainBlockOn(steps.drain, docSock), onDocSock+"undrain")
	if out := e31(drainBlockOn(steps.drain, docSock), onDocSock+"id"); strings.Contains(out, "drained") {
		t.Fatalf("e31 id still says the node is drained after undrain:\n%s", out)
	}

	// What the GPUs earned: the submitter's GPU-hours.
	usage := e31(steps.path, onDocSock+"usage --since 720h")
	if !strings.Contains(usage, sub.PeerID) || !strings.Contains(usage, "RTX4090") {
		t.Fatalf("e31 usage does not name the submitter %s:\n%s", sub.PeerID, usage)
	}
	var rep ledger.UsageReport
	if err := json.Unmarshal([]byte(e31(steps.path, onDocSock+"usage --since 720h", "--json")), &rep); err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(rep.ByPeer, func(u ledger.UsageTotal) bool {
		return u.Peer.String() == sub.PeerID && u.GPUHours > 0
	}) {
		t.Fatalf("e31 usage --json has no GPU-hours with the submitter %s: %+v", sub.PeerID, rep.ByPeer)
	}
	t.Logf("e31 usage --since 720h:\n%s", usage)

	// Stop the service: SIGTERM, and the daemon exits 0.
	if err := daemon.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		stopped = true
		if err != nil {
			t.Fatalf("e31d after SIGTERM: %v", err)
		}
	case <-time.After(2 * time.Minute): // the unit's TimeoutStopSec
		t.Fatal("e31d did not exit within 2 minutes of SIGTERM")
	}
}

// docSteps hands out the doc's commands as the test runs them: each one
// must be in the doc, and the path's in its order.
type docSteps struct {
	t           *testing.T
	path, drain []string
	last        int // index in path of the last command run
}

// path1 is run for a path command the test replaces by a stand-in.
func (s *docSteps) path1(want string) string {
	s.t.Helper()
	return strings.Join(s.run(s.path, want), " ")
}

// pathWith is run for the path command that holds words (one that starts
// with environment variables), replaced by a stand-in.
func (s *docSteps) pathWith(words string) {
	s.t.Helper()
	i := slices.IndexFunc(s.path, func(c string) bool { return strings.Contains(c, words) })
	if i < 0 || i < s.last {
		s.t.Fatalf("the doc's path has no %q after %q:\n%s", words, s.path[max(s.last, 0)], strings.Join(s.path, "\n"))
	}
	s.last = i
}

// run finds the command of block that starts with want and returns its
// words, failing the test if the doc has none or, for the path, if it
// comes before the last one run.
func (s *docSteps) run(block []string, want string) []string {
	s.t.Helper()
	i := slices.IndexFunc(block, func(c string) bool { return c == want || strings.HasPrefix(c, want+" ") })
	if i < 0 {
		s.t.Fatalf("the doc no longer lists %q; its commands:\n%s", want, strings.Join(block, "\n"))
	}
	if &block[0] == &s.path[0] {
		if i < s.last {
			s.t.Fatalf("%q comes before %q in the doc", want, s.path[s.last])
		}
		s.last = i
	}
	words := strings.Fields(block[i])
	return words[:len(strings.Fields(want))]
}

// drainBlockOn gives the drain block's commands the path's --api.
func drainBlockOn(block []string, sock string) []string {
	out := make([]string, len(block))
	for i, c := range block {
		out[i] = strings.Replace(c, "e31 ", "e31 --api "+sock+" ", 1)
	}
	return out
}

// shBlocks returns each ```sh block of a markdown text as its commands:
// lines without their comments, blank ones left out.
func shBlocks(md string) [][]string {
	var blocks [][]string
	var cur []string
	in := false
	for _, l := range strings.Split(md, "\n") {
		switch {
		case !in && strings.TrimSpace(l) == "```sh":
			in, cur = true, nil
		case in && strings.TrimSpace(l) == "```":
			in = false
			blocks = append(blocks, cur)
		case in:
			if i := strings.Index(l, " #"); i >= 0 {
				l = l[:i]
			}
			if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "#") {
				cur = append(cur, strings.Join(strings.Fields(l), " "))
			}
		}
	}
	return blocks
}

// editTOML sets each key of set in a TOML text, replacing its line (and
// the lines of an array that spans several), as $EDITOR would.
func editTOML(t *testing.T, text string, set map[string]string) string {
	t.Helper()
	lines := strings.Split(text, "\n")
	var out []string
	seen := map[string]bool{}
	for i := 0; i < len(lines); i++ {
		l := lines[i]
		key, _, ok := strings.Cut(l, " = ")
		v, want := set[key]
		if !ok || !want {
			out = append(out, l)
			continue
		}
		seen[key] = true
		if strings.HasSuffix(strings.TrimSpace(l), "[") {
			for i < len(lines) && strings.TrimSpace(lines[i]) != "]" {
				i++
			}
		}
		out = append(out, key+" = "+v)
	}
	for k := range set {
		if !seen[k] {
			t.Fatalf("cmd/e31d/dist/e31d.toml has no %s key to edit", k)
		}
	}
	return strings.Join(out, "\n")
}

func quoteTOML(s string) string { b, _ := json.Marshal(s); return string(b) }

// runCmd runs argv and returns its output and exit status; a command that
// could not be run at all fails the test.
func runCmd(t *testing.T, ctx context.Context, argv ...string) (string, int) {
	t.Helper()
	out, err := exec.CommandContext(ctx, argv[0], argv[1:]...).CombinedOutput()
	if ee, ok := err.(*exec.ExitError); ok {
		return string(out), ee.ExitCode()
	}
	if err != nil {
		t.Fatalf("%s: %v\n%s", strings.Join(argv, " "), err, out)
	}
	return string(out), 0
}
