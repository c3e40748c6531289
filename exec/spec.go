package exec

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// ErrSpec is wrapped by the errors Run returns for a Spec it cannot run as
// given.
var ErrSpec = errors.New("invalid job spec")

// ErrStopNow, as the cause of the context Run was given (or wrapped by
// it), stops the job without its grace: SIGKILL at once, as a provider
// that must have its machine back now asks.
var ErrStopNow = errors.New("stopped at once, with no grace")

// Defaults applied to a Spec's zero fields.
const (
	DefaultPids   int64 = 1024
	DefaultGrace        = 30 * time.Second
	DefaultLogCap int64 = 8 << 20
)

// Mount exposes a host path inside the sandbox.
type Mount struct {
	// Source is the path on the host.
	Source string
	// Target is the absolute path inside the sandbox.
	Target string
}

// Spec describes one run of a job.
type Spec struct {
	// ID is the lease ID. The container is named ContainerID(ID); one Run
	// per ID at a time.
	ID string
	// Dir is the lease directory on the host. The runner owns Dir/bundle
	// (the bundle's place unless RunnerOptions.BundleRoot is set),
	// Dir/stdout.log and Dir/stderr.log and creates Dir if it is missing.
	Dir string

	// Command is the job's program and arguments. With an Image, a
	// non-empty Command replaces the image's Entrypoint and Cmd, and an
	// empty one runs them (as `docker run` does).
	Command []string
	// Env is the job's environment, set over the image's.
	Env map[string]string
	// WorkDir, if set, is the folder the command starts in, created by
	// the runtime if missing; else the image's WorkingDir, or without an
	// Image the output folder.
	WorkDir string

	// Image, if set, is the job's own root filesystem and run
	// configuration; without it the job runs on the host's system
	// directories. See doc.go for what changes with an image.
	Image *ImageRoot

	// Inputs are mounted read-only.
	Inputs []Mount
	// Output is mounted read-write; its host directory is created if
	// missing. Without an Image it is the job's working directory.
	Output Mount
	// Checkpoint, if set, is mounted read-write like Output.
	Checkpoint *Mount

	// CPUs is the CPU quota in whole CPUs; 0 means no quota.
	CPUs int
	// MemoryBytes limits memory (and memory plus swap); 0 means no limit.
	MemoryBytes uint64
	// Pids limits the number of processes and threads; 0 means
	// DefaultPids.
	Pids int64

	// Limit is the wall-clock limit of the run; 0 means none.
	Limit time.Duration
	// Grace is the time between SIGTERM and SIGKILL at the limit or on a
	// stop; 0 means DefaultGrace.
	Grace time.Duration

	// GPUs are the leased GPUs.
	GPUs []GPU

	// LogCap is how many bytes of each of stdout and stderr are kept (the
	// last ones); 0 means DefaultLogCap.
	LogCap int64

	// NetNS, if set, is the path of a network namespace the job joins
	// instead of a new one of its own with loopback alone: a gang part's,
	// made by the provider with the gang's private interface in it
	// (node/gangnet). Nothing else of the host's network is in it.
	NetNS string
	// Sysfs, with NetNS, is a sysfs mounted from inside that namespace,
	// bound read-only at /sys so that /sys/class/net shows the job's own
	// interfaces.
	Sysfs string

	// Disk, if set, bounds what the job can write (MountDisk): the Output
	// and Checkpoint sources must be inside Disk.Path, and /tmp (and an
	// image job's HOME) are made there too. Without it only memory bounds
	// /tmp, and nothing bounds the output.
	Disk *Disk

	// Secrets are values the job reads that must never reach a disk, by
	// name: each is the variable NAME (unless its value holds a NUL, which
	// no variable can) and the file SecretsDir/NAME, mode 0400 and owned
	// by the job's user. A run with secrets has its bundle, which holds
	// both the files and the config naming the variables, on a tmpfs of
	// its own, unmounted by Cleanup. Nothing of the job may be mounted at
	// or above SecretsDir then.
	Secrets map[string][]byte
}

// withDefaults returns s with its zero fields defaulted, or an error
// naming what is wrong with it.
func (s Spec) withDefaults() (Spec, error) {
	if s.ID == "" {
		return s, fmt.Errorf("%w: no ID", ErrSpec)
	}
	if !filepath.IsAbs(s.Dir) {
		return s, fmt.Errorf("%w: lease dir %q is not absolute", ErrSpec, s.Dir)
	}
	s.Dir = filepath.Clean(s.Dir)
	if s.Image != nil {
		if err := checkImage(s.Image); err != nil {
			return s, err
		}
		args, err := imageArgs(s.Command, s.Image.Config)
		if err != nil {
			return s, err
		}
		s.Command = args
	}
	if len(s.Command) == 0 || s.Command[0] == "" {
		return s, fmt.Errorf("%w: no command", ErrSpec)
	}
	if s.WorkDir != "" && (!path.IsAbs(s.WorkDir) || path.Clean(s.WorkDir) != s.WorkDir || strings.Contains(s.WorkDir, "\x00")) {
		return s, fmt.Errorf("%w: working directory %q is not an absolute clean path", ErrSpec, s.WorkDir)
	}
	for k, v := range s.Env {
		if k == "" || strings.ContainsAny(k, "=\x00") || strings.Contains(v, "\x00") {
			return s, fmt.Errorf("%w: environment variable %q", ErrSpec, k)
		}
	}
	for _, p := range []string{s.NetNS, s.Sysfs} {
		if p != "" && (!filepath.IsAbs(p) || filepath.Clean(p) != p) {
			return s, fmt.Errorf("%w: network namespace or its sysfs %q is not an absolute clean path", ErrSpec, p)
		}
	}
	if s.CPUs < 0 || s.Pids < 0 || s.Limit < 0 || s.Grace < 0 || s.LogCap < 0 {
		return s, fmt.Errorf("%w: negative CPUs, pids, limit, grace or log cap", ErrSpec)
	}
	if s.Pids == 0 {
		s.Pids = DefaultPids
	}
	if s.Grace == 0 {
		s.Grace = DefaultGrace
	}
	if s.LogCap == 0 {
		s.LogCap = DefaultLogCap
	}
	for _, g := range s.GPUs {
		if !g.Simulated && g.Minor < 0 {
			return s, fmt.Errorf("%w: GPU %s has no device minor", ErrSpec, g.UUID)
		}
	}

	if s.Disk != nil {
		if err := checkOnDisk(s); err != nil {
			return s, err
		}
	}

	s.Inputs = slices.Clone(s.Inputs) // cleaned below; the caller's slice stays as given
	seen := map[string]bool{}
	bundle := bundleDir(s.Dir)
	check := func(what string, m Mount) error {
		if err := checkMount(m); err != nil {
			return fmt.Errorf("%w: %s: %w", ErrSpec, what, err)
		}
		// The bundle is deleted after every run.
		if src := filepath.Clean(m.Source); src == bundle || strings.HasPrefix(src, bundle+"/") {
			return fmt.Errorf("%w: %s: source %s is inside the runner's bundle", ErrSpec, what, m.Source)
		}
		if seen[m.Target] {
			return fmt.Errorf("%w: %s: target %s is mounted twice", ErrSpec, what, m.Target)
		}
		seen[m.Target] = true
		return nil
	}
	for i := range s.Inputs {
		s.Inputs[i].Target = path.Clean(s.Inputs[i].Target)
		if err := check("input", s.Inputs[i]); err != nil {
			return s, err
		}
	}
	s.Output.Target = path.Clean(s.Output.Target)
	if err := check("output", s.Output); err != nil {
		return s, err
	}
	if s.Checkpoint != nil {
		c := *s.Checkpoint
		c.Target = path.Clean(c.Target)
		s.Checkpoint = &c
		if err := check("checkpoint", c); err != nil {
			return s, err
		}
	}
	return s, checkSecrets(s)
}

// checkOnDisk checks that every writable mount of s is on its disk: one
// outside would escape the quota.
func checkOnDisk(s Spec) error {
	if !filepath.IsAbs(s.Disk.Path) || s.Disk.Bytes == 0 {
		return fmt.Errorf("%w: disk %q of %d bytes", ErrSpec, s.Disk.Path, s.Disk.Bytes)
	}
	disk := filepath.Clean(s.Disk.Path)
	writable := []Mount{s.Output}
	if s.Checkpoint != nil {
		writable = append(writable, *s.Checkpoint)
	}
	for _, m := range writable {
		if src := filepath.Clean(m.Source); !strings.HasPrefix(src, disk+"/") {
			return fmt.Errorf("%w: %s: source %s is not on the job's disk %s", ErrSpec, m.Target, m.Source, disk)
		}
	}
	return nil
}

// checkImage checks an image root's layers and working directory.
func checkImage(img *ImageRoot) error {
	if len(img.Layers) == 0 {
		return fmt.Errorf("%w: image has no layers", ErrSpec)
	}
	for _, l := range img.Layers {
		if !filepath.IsAbs(l) {
			return fmt.Errorf("%w: image layer %q is not an absolute host path", ErrSpec, l)
		}
	}
	if _, err := imageWorkDir(img.Config); err != nil {
		return err
	}
	return nil
}

// reservedTargets are the sandbox's own directories. A job mount on or
// under one could hide the sandbox's masks and device policy, or make the
// runtime create a mount point through a bind of a host system directory.
var reservedTargets = []string{
	"/proc", "/sys", "/dev", "/etc", "/usr",
	"/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32",
}

func checkMount(m Mount) error {
	if !filepath.IsAbs(m.Source) {
		return fmt.Errorf("source %q is not an absolute host path", m.Source)
	}
	if !path.IsAbs(m.Target) || m.Target == "/" {
		return fmt.Errorf("target %q is not an absolute path below /", m.Target)
	}
	if slices.ContainsFunc(reservedTargets, func(r string) bool {
		return m.Target == r || strings.HasPrefix(m.Target, r+"/")
	}) {
		return fmt.Errorf("target %s is in a directory the sandbox reserves", m.Target)
	}
	return nil
}

// ContainerID is the runtime's name for the container of lease id: "e31-",
// up to 24 characters of the ID made safe for a container name, "-", and
// 16 hex digits of its SHA-256. The hash keeps distinct leases distinct
// whatever the truncation and substitution did; the readable part lets an
// operator match `runc list` to a lease.
func ContainerID(id string) string {
	var b strings.Builder
	b.WriteString("e31-")
	for _, r := range id {
		if b.Len() >= 4+24 {
			break
		}
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' || r == '.' {
			b.WriteRune(r)
		} else {
			b.WriteByte('_')
		}
	}
	sum := sha256.Sum256([]byte(id))
	b.WriteByte('-')
	b.WriteString(hex.EncodeToString(sum[:8]))
	return b.String()
}
