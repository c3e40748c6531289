package exec

import (
	"bytes"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"

	specs "github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/sys/unix"
)

// SecretsDir is the folder in the sandbox where each of a run's secrets
// (Spec.Secrets) is a file.
const SecretsDir = "/run/secrets"

// secretsFolder is the folder in a bundle that is bound at SecretsDir.
const secretsFolder = "secrets"

// secretsBundleBytes sizes the tmpfs of a bundle with secrets, besides
// the secrets themselves, which it holds twice (the files, and the
// variables in config.json): the bundle's skeleton, config and the
// runtime's log are a few hundred KiB.
const secretsBundleBytes = 16 << 20

// checkSecrets checks a spec's secrets: each named as a variable can be,
// and nothing else of the job mounted where they go.
func checkSecrets(s Spec) error {
	if len(s.Secrets) == 0 {
		return nil
	}
	for name := range s.Secrets {
		if !secretName(name) {
			return fmt.Errorf("%w: secret name %q", ErrSpec, name)
		}
	}
	targets := []string{s.Output.Target}
	for _, m := range s.Inputs {
		targets = append(targets, m.Target)
	}
	if s.Checkpoint != nil {
		targets = append(targets, s.Checkpoint.Target)
	}
	for _, t := range targets {
		_, under := inside(SecretsDir, t)
		_, over := inside(t, SecretsDir)
		if under || over {
			return fmt.Errorf("%w: %s overlaps %s, where the job's secrets go", ErrSpec, t, SecretsDir)
		}
	}
	return nil
}

// secretName reports whether name is a variable name, and so a file name
// too: letters, digits and _, not starting with a digit.
func secretName(name string) bool {
	if name == "" || len(name) > 255 {
		return false
	}
	for i, c := range []byte(name) {
		switch {
		case c == '_', c >= 'A' && c <= 'Z', c >= 'a' && c <= 'z':
		case c >= '0' && c <= '9' && i > 0:
		default:
			return false
		}
	}
	return true
}

// secretEnv adds to env each secret whose value a variable can hold: one
// with a NUL is a file only.
func secretEnv(env map[string]string, secrets map[string][]byte) {
	for name, v := range secrets {
		if !bytes.ContainsRune(v, 0) {
			env[name] = string(v)
		}
	}
}

// mountBundleTmpfs puts the bundle of a run with secrets on a tmpfs of its
// own: the bundle's config.json holds the job's variables, the secrets
// among them, and its secrets folder the files, none of which may reach a
// disk. Cleanup unmounts it (removeBundle), and the secrets with it. A
// run without secrets keeps its bundle where the runner puts bundles.
func mountBundleTmpfs(bundle string, secrets map[string][]byte) error {
	if len(secrets) == 0 {
		return nil
	}
	if err := os.MkdirAll(bundle, 0o700); err != nil {
		return fmt.Errorf("bundle: %w", err)
	}
	total := 0
	for _, v := range secrets {
		total += len(v)
	}
	opts := fmt.Sprintf("mode=0700,size=%dk", (secretsBundleBytes+2*total)/1024+1)
	if err := unix.Mount("tmpfs", bundle, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, opts); err != nil {
		return fmt.Errorf("bundle: mount a tmpfs for the job's secrets: %w", err)
	}
	// The folder is there before the config is made: an image's skeleton
	// layer gets a mount point for each bind by its source's kind.
	if err := os.Mkdir(filepath.Join(bundle, secretsFolder), 0o700); err != nil {
		return fmt.Errorf("bundle: %w", err)
	}
	return nil
}

// secretsMount binds the bundle's secrets folder at SecretsDir, read-only.
func secretsMount(bundle string) specs.Mount {
	return specs.Mount{Destination: SecretsDir, Type: "bind", Source: filepath.Join(bundle, secretsFolder),
		Options: []string{"bind", "ro", "nosuid", "nodev", "noexec"}}
}

// writeSecrets writes each secret as a file of the bundle's secrets
// folder, which mountBundleTmpfs made on its tmpfs: mode 0400 and owned by
// the job's user on the host (uid, gid), in a folder only that user may
// list.
func writeSecrets(bundle string, secrets map[string][]byte, uid, gid int) error {
	if len(secrets) == 0 {
		return nil
	}
	dir := filepath.Join(bundle, secretsFolder)
	if !onTmpfs(dir) {
		return fmt.Errorf("secrets: %s is not on a tmpfs", dir)
	}
	for _, name := range slices.Sorted(maps.Keys(secrets)) {
		f, err := os.OpenFile(filepath.Join(dir, name), os.O_WRONLY|os.O_CREATE|os.O_EXCL|unix.O_NOFOLLOW, 0o400)
		if err != nil {
			return fmt.Errorf("secrets: %w", err)
		}
		_, werr := f.Write(secrets[name])
		cerr := f.Chown(uid, gid)
		if err := errors.Join(werr, cerr, f.Close()); err != nil {
			return fmt.Errorf("secrets: %s: %w", name, err)
		}
	}
	// The folder last: once it is the job's, only the job may list it.
	if err := os.Chown(dir, uid, gid); err != nil {
		return fmt.Errorf("secrets: %w", err)
	}
	if err := os.Chmod(dir, 0o500); err != nil {
		return fmt.Errorf("secrets: %w", err)
	}
	return nil
}

// unmountBundleTmpfs unmounts the tmpfs mountBundleTmpfs put at bundle, if
// it is there: what it held, the secrets, is gone with it. A tmpfs still
// in use (a process of the job that outlived its container) is detached:
// the kernel frees it with its last user, and it was never on a disk.
func unmountBundleTmpfs(bundle string) error {
	// More than one, after a crash between a mount and its unmount and
	// another run's mount over it.
	for range 8 {
		mounted, err := mountedUnder(bundle)
		if err != nil {
			return fmt.Errorf("unmount the bundle's tmpfs: %w", err)
		}
		if !slices.Contains(mounted, bundle) {
			return nil
		}
		if err := unix.Unmount(bundle, 0); err != nil {
			if err := unix.Unmount(bundle, unix.MNT_DETACH); err != nil {
				return fmt.Errorf("unmount the bundle's tmpfs %s: %w", bundle, err)
			}
		}
	}
	return fmt.Errorf("unmount the bundle's tmpfs %s: still mounted", bundle)
}
