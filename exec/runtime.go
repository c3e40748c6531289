package exec

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// runtimeTimeout bounds each short runtime command (kill, delete, list):
// they touch only local state, and a hung one must not hold up a stop.
const runtimeTimeout = 30 * time.Second

// ociRuntime drives an OCI runtime binary, runc or crun, whose command
// lines agree for everything used here.
type ociRuntime struct {
	path string // the binary
	root string // --root: where the runtime keeps container state
}

// command builds a runtime command with the global flags first.
func (rt ociRuntime) command(ctx context.Context, args ...string) *exec.Cmd {
	return exec.CommandContext(ctx, rt.path, append([]string{"--root", rt.root}, args...)...)
}

// do runs a short runtime command and returns its error with the
// runtime's own message.
func (rt ociRuntime) do(ctx context.Context, args ...string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, runtimeTimeout)
	defer cancel()
	var stdout, stderr bytes.Buffer
	cmd := rt.command(ctx, args...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		msg := strings.TrimSpace(stderr.String())
		if msg == "" {
			msg = strings.TrimSpace(stdout.String())
		}
		return nil, fmt.Errorf("%s %s: %w: %s", filepath.Base(rt.path), args[0], err, msg)
	}
	return stdout.Bytes(), nil
}

// exists reports whether the runtime holds state for container cid. Both
// runc and crun keep it in a directory named after the container under
// --root, and looking there saves a process per check.
func (rt ociRuntime) exists(cid string) bool {
	_, err := os.Stat(filepath.Join(rt.root, cid))
	return err == nil
}

// signal sends sig to every process of the container. --all because a
// job's main process is often a shell whose children do the work, and
// because pid 1 ignores signals it has no handler for.
func (rt ociRuntime) signal(ctx context.Context, cid, sig string) error {
	_, err := rt.do(ctx, "kill", "--all", cid, sig)
	return err
}

// remove deletes the container, killing what is left of it; a container
// that does not exist is already removed.
func (rt ociRuntime) remove(ctx context.Context, cid string) error {
	if !rt.exists(cid) {
		return nil
	}
	if _, err := rt.do(ctx, "delete", "--force", cid); err != nil && rt.exists(cid) {
		return err
	}
	return nil
}

// errRuntimeDelete says that a container must be deleted by the runtime
// itself: removeStopped cannot do all that a delete would.
var errRuntimeDelete = errors.New("container needs the runtime's delete")

// removeStopped deletes the state of a stopped container without starting
// the runtime, which costs a runtime process (a quarter of a trivial job's
// sandbox CPU). Deleting a stopped container is, for runc and crun alike,
// removing its cgroups, its state directory under --root, and running the
// spec's poststop hooks. removeCgroups removes the cgroups (it fails while
// any process is left in one), and a spec with poststop hooks is left to
// the runtime (errRuntimeDelete). The container must be stopped: its init
// has exited, and with it, in its own pid namespace, every process of the
// job.
func (rt ociRuntime) removeStopped(cid, bundle string, removeCgroups func() error) error {
	b, err := os.ReadFile(filepath.Join(bundle, "config.json"))
	if err != nil {
		return fmt.Errorf("%w: %w", errRuntimeDelete, err)
	}
	var cfg struct {
		Hooks struct {
			Poststop []json.RawMessage `json:"poststop"`
		} `json:"hooks"`
	}
	if err := json.Unmarshal(b, &cfg); err != nil {
		return fmt.Errorf("%w: %w", errRuntimeDelete, err)
	}
	if len(cfg.Hooks.Poststop) > 0 {
		return fmt.Errorf("%w: the spec has poststop hooks", errRuntimeDelete)
	}
	if err := removeCgroups(); err != nil {
		return fmt.Errorf("%w: %w", errRuntimeDelete, err)
	}
	if err := os.RemoveAll(filepath.Join(rt.root, cid)); err != nil {
		return fmt.Errorf("remove container state: %w", err)
	}
	return nil
}

// containerState is the part of `runtime list --format json` used here.
type containerState struct {
	ID          string            `json:"id"`
	Status      string            `json:"status"`
	Bundle      string            `json:"bundle"`
	Annotations map[string]string `json:"annotations"`
}

// list returns the containers under the runtime's root.
func (rt ociRuntime) list(ctx context.Context) ([]containerState, error) {
	if _, err := os.Stat(rt.root); errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	// runc lists by reading every container's state folder; a container
	// removed between its readdir and its stat fails the whole listing, so a
	// listing that races a removal is taken again.
	var out []byte
	var err error
	for try := 0; try < 5; try++ {
		out, err = rt.do(ctx, "list", "--format", "json")
		if err == nil || !strings.Contains(err.Error(), "no such file or directory") {
			break
		}
	}
	if err != nil {
		return nil, err
	}
	var cs []containerState
	if len(bytes.TrimSpace(out)) == 0 || bytes.Equal(bytes.TrimSpace(out), []byte("null")) {
		return nil, nil
	}
	if err := json.Unmarshal(out, &cs); err != nil {
		return nil, fmt.Errorf("%s list: %w", filepath.Base(rt.path), err)
	}
	return cs, nil
}

// version returns the first line of `runtime --version`.
func (rt ociRuntime) version(ctx context.Context) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, runtimeTimeout)
	defer cancel()
	out, err := exec.CommandContext(ctx, rt.path, "--version").Output()
	if err != nil {
		return "", fmt.Errorf("%s --version: %w", rt.path, err)
	}
	line, _, _ := strings.Cut(string(out), "\n")
	return strings.TrimSpace(line), nil
}

// runtimeError returns the last error the runtime wrote to its JSON log
// (--log-format json), or "". The runtime's log is separate from the job's
// stderr so that a runtime failure can be told from a job that exits 1.
func runtimeError(logFile string) string {
	f, err := os.Open(logFile)
	if err != nil {
		return ""
	}
	defer f.Close()
	var last string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		var e struct {
			Level string `json:"level"`
			Msg   string `json:"msg"`
		}
		if json.Unmarshal(sc.Bytes(), &e) != nil {
			continue
		}
		if e.Level == "error" || e.Level == "fatal" || e.Level == "panic" {
			last = e.Msg
		}
	}
	return last
}

// runtimeCandidates lists the runtime binaries to try, in order of
// preference: the one configured, else runc then crun from PATH or the
// usual system directories (a daemon's PATH often lacks sbin).
func runtimeCandidates(configured string) []string {
	if configured != "" {
		if strings.ContainsRune(configured, '/') {
			return []string{configured}
		}
		if p, err := exec.LookPath(configured); err == nil {
			return []string{p}
		}
		return nil
	}
	var out, seen []string
	for _, name := range []string{"runc", "crun"} {
		paths := []string{}
		if p, err := exec.LookPath(name); err == nil {
			paths = append(paths, p)
		}
		for _, dir := range []string{"/usr/sbin", "/usr/bin", "/usr/local/sbin", "/usr/local/bin", "/sbin", "/bin"} {
			paths = append(paths, filepath.Join(dir, name))
		}
		for _, p := range paths {
			real, err := filepath.EvalSymlinks(p)
			if err != nil {
				continue
			}
			if st, err := os.Stat(real); err != nil || st.IsDir() || st.Mode()&0o111 == 0 {
				continue
			}
			if !slices.Contains(seen, real) {
				seen = append(seen, real)
				out = append(out, p)
			}
		}
	}
	return out
}
