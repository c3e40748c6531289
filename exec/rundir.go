package exec

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// runDirBase holds the run directories of every runner on the machine.
const runDirBase = "/run/e31"

// runDirBytes bounds the tmpfs RunDir mounts: a run's bundle and its
// runtime state are a few dozen KiB.
const runDirBytes = 256 << 20

// RunDir returns the run directory of the runner known by key (a daemon's
// data directory): /run/e31/<digest of key>, created. It holds what lives no
// longer than the containers do: the runtime's state (RunnerOptions.StateRoot)
// and the runs' bundles (RunnerOptions.BundleRoot).
//
// It is on a tmpfs. /run is one on most systems; where it is not, RunDir
// mounts one at /run/e31, once for the machine, and leaves it there until
// reboot, as /run itself would be. On a disk, writing a bundle and the
// runtime's state and deleting them again cost a trivial job several
// milliseconds of CPU (see doc.go, "Run directory"). If no tmpfs can be
// mounted (not root), the directory is used where it is, and the error
// says why.
func RunDir(key string) (string, error) {
	dir := RunDirOf(key)
	if err := os.MkdirAll(runDirBase, 0o755); err != nil {
		return "", fmt.Errorf("run dir: %w", err)
	}
	terr := ensureTmpfs(runDirBase)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", fmt.Errorf("run dir: %w", err)
	}
	if terr != nil {
		return dir, fmt.Errorf("run dir %s is not on a tmpfs: %w", dir, terr)
	}
	return dir, nil
}

// RunDirOf is the run directory RunDir gives key, without making it.
func RunDirOf(key string) string {
	if abs, err := filepath.Abs(key); err == nil {
		key = abs // the same directory by any name
	}
	sum := sha256.Sum256([]byte(key))
	return filepath.Join(runDirBase, hex.EncodeToString(sum[:6]))
}

// RunDirRoots are the runtime's state root and the bundle root in the run
// directory dir (RunnerOptions.StateRoot and BundleRoot).
func RunDirRoots(dir string) (stateRoot, bundleRoot string) {
	return filepath.Join(dir, "runtime"), filepath.Join(dir, "bundles")
}

// ensureTmpfs mounts a tmpfs at dir unless dir is on one already. A lock
// file beside dir keeps two daemons starting together from mounting twice,
// which would hide what the first wrote under the second.
func ensureTmpfs(dir string) error {
	if onTmpfs(dir) {
		return nil
	}
	lock, err := os.OpenFile(dir+".lock", os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return err
	}
	defer lock.Close()
	if err := unix.Flock(int(lock.Fd()), unix.LOCK_EX); err != nil {
		return err
	}
	if onTmpfs(dir) {
		return nil
	}
	// Never over files: another runner's state there would be hidden
	// from it.
	if entries, err := os.ReadDir(dir); err != nil || len(entries) > 0 {
		return fmt.Errorf("%s already holds files: no tmpfs mounted over them", dir)
	}
	opts := fmt.Sprintf("mode=0755,size=%d", runDirBytes)
	if err := unix.Mount("tmpfs", dir, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, opts); err != nil {
		return fmt.Errorf("mount a tmpfs at %s: %w", dir, err)
	}
	return nil
}

// onTmpfs reports whether path is on a tmpfs.
func onTmpfs(path string) bool {
	var st unix.Statfs_t
	return unix.Statfs(path, &st) == nil && st.Type == unix.TMPFS_MAGIC
}

// RemoveRunDir removes dir, which RunDir returned, and the state and bundle
// roots in it, if they are empty: what a daemon that stopped with no
// container left leaves behind. A container left running keeps it.
func RemoveRunDir(dir string) error {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	for _, e := range entries {
		if e.IsDir() {
			_ = os.Remove(filepath.Join(dir, e.Name())) // only if empty
		}
	}
	if err := os.Remove(dir); err != nil && !errors.Is(err, os.ErrNotExist) && !errors.Is(err, unix.ENOTEMPTY) {
		return err
	}
	return nil
}
