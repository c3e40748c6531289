package exec

import (
	"fmt"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	specs "github.com/opencontainers/runtime-spec/specs-go"
)

// prepareSandbox writes the bundle of a run of s (and, for an image job,
// mounts its root and hands the writable directories to the image's
// user). The caller's Cleanup undoes all of it, also after an error.
func (r *Runner) prepareSandbox(s Spec, cid, bundle string) error {
	if s.Image != nil && r.imageErr != nil {
		return r.imageErr
	}
	if err := mountBundleTmpfs(bundle, s.Secrets); err != nil {
		return err
	}
	host := r.host
	if s.Image != nil {
		host.binds, host.links = nil, nil
	}
	cdiNames := r.gpu.cdiNames(s.GPUs)
	var devices []specs.LinuxDevice
	if cdiNames == nil {
		var err error
		if devices, err = gpuDevices(s.GPUs); err != nil {
			return err
		}
	}
	cfg := sandboxConfig(s, cid, host, devices)
	if err := r.limitHost(cfg, s); err != nil {
		return err
	}
	if len(s.Secrets) > 0 {
		cfg.Mounts = append(cfg.Mounts, secretsMount(bundle))
	}
	hostPaths := map[string]string{}
	if cdiNames != nil {
		var err error
		if hostPaths, err = r.gpu.injectCDI(cfg, cdiNames); err != nil {
			return err
		}
		// The spec may set its own; the runner's names only the leased
		// GPUs, by UUID.
		setEnv(cfg, "CUDA_VISIBLE_DEVICES", visibleDevices(s.GPUs))
		if s.Image != nil {
			// An image's ld.so.cache does not know the libraries the
			// spec mounts, and the spec's update-ldcache hook cannot
			// write to a read-only root (a job without a disk).
			addLibraryPath(cfg, libraryDirs(cfg.Mounts))
		}
	}
	if s.Image == nil {
		// A host uid of its own (jobuid.go), given back by Cleanup.
		uid, err := r.uids.claim(r.host.cgroups.path(cid))
		if err != nil {
			return err
		}
		cfg.Process.User = specs.User{UID: uid, GID: uid}
		if err := writeBundle(bundle, cfg, host); err != nil {
			return err
		}
		// No user namespace: the job's ids are the host's.
		if err := writeSecrets(bundle, s.Secrets, int(cfg.Process.User.UID), int(cfg.Process.User.GID)); err != nil {
			return err
		}
		return handOverWritable(s, int(uid), int(uid))
	}

	if len(devices) > 0 {
		mounts, dirs, err := r.gpu.driverMounts()
		if err != nil {
			return err
		}
		cfg.Mounts = append(cfg.Mounts, mounts...)
		addLibraryPath(cfg, dirs)
	}
	userNamespace(cfg, r.uidBase)
	devicesToBinds(cfg, hostPaths)
	if err := os.MkdirAll(bundle, 0o700); err != nil {
		return fmt.Errorf("bundle: %w", err)
	}
	entries, err := skeletonEntries(cfg)
	if err != nil {
		return err
	}
	skeleton := filepath.Join(bundle, "skeleton")
	if err := writeSkeleton(skeleton, entries, generatedEtc["hosts"], r.uidBase); err != nil {
		return err
	}
	lowers := slices.Concat(s.Image.Layers, []string{skeleton})
	var upper *rootUpper
	if s.Disk != nil {
		// Writable, as docker run's root is, within request.disk.
		if upper, err = makeRootUpper(*s.Disk, lowers[0]); err != nil {
			return err
		}
	}
	m := r.rootMount(cid)
	if err := mountImageRoot(m, s.ID, lowers, upper); err != nil {
		return err
	}
	cfg.Root = &specs.Root{Path: m.rootfs(), Readonly: upper == nil}
	if err := r.setImageUser(cfg, s, m); err != nil {
		return err
	}
	uid, gid := int(r.uidBase+cfg.Process.User.UID), int(r.uidBase+cfg.Process.User.GID)
	if err := handOverWritable(s, uid, gid); err != nil {
		return err
	}
	if err := writeSecrets(bundle, s.Secrets, uid, gid); err != nil {
		return err
	}
	return writeConfig(bundle, cfg)
}

// setImageUser resolves the image's user against the image's own
// /etc/passwd and /etc/group and gives the job its HOME.
func (r *Runner) setImageUser(cfg *specs.Spec, s Spec, m rootMount) error {
	root, err := os.OpenRoot(m.rootfs())
	if err != nil {
		return fmt.Errorf("image root: %w", err)
	}
	defer root.Close()
	passwd, err := readImageFile(root, "etc/passwd")
	if err != nil {
		return fmt.Errorf("%w: image /etc/passwd: %w", ErrSpec, err)
	}
	group, err := readImageFile(root, "etc/group")
	if err != nil {
		return fmt.Errorf("%w: image /etc/group: %w", ErrSpec, err)
	}
	u, err := resolveUser(s.Image.Config.User, passwd, group)
	if err != nil {
		return fmt.Errorf("%w: image user: %w", ErrSpec, err)
	}
	cfg.Process.User = specs.User{UID: u.uid, GID: u.gid, AdditionalGids: u.groups}

	var taken []string
	for _, mnt := range cfg.Mounts {
		taken = append(taken, mnt.Destination)
	}
	home := imageHome(root, u.home, taken)
	if home != "" && s.Disk != nil {
		// On the job's disk, like /tmp.
		src := filepath.Join(s.Disk.Path, "home")
		if err := os.RemoveAll(src); err != nil {
			return fmt.Errorf("disk home: %w", err)
		}
		if err := os.Mkdir(src, 0o700); err != nil {
			return fmt.Errorf("disk home: %w", err)
		}
		if err := os.Lchown(src, int(r.uidBase+u.uid), int(r.uidBase+u.gid)); err != nil {
			return fmt.Errorf("disk home: %w", err)
		}
		cfg.Mounts = append(cfg.Mounts, specs.Mount{Destination: home, Type: "bind", Source: src, Options: []string{"bind", "rw", "nosuid", "nodev"}})
	} else if home != "" {
		cfg.Mounts = append(cfg.Mounts, specs.Mount{
			Destination: home, Type: "tmpfs", Source: "tmpfs",
			Options: []string{"nosuid", "nodev", "mode=0700",
				"uid=" + strconv.FormatUint(uint64(u.uid), 10), "gid=" + strconv.FormatUint(uint64(u.gid), 10),
				tmpfsSize(cfg)},
		})
	} else {
		home = "/tmp"
	}
	if !hasEnv(cfg, "HOME") {
		setEnv(cfg, "HOME", home)
	}
	return nil
}

// tmpfsSize is the size option of the sandbox's /tmp, which HOME shares.
func tmpfsSize(cfg *specs.Spec) string {
	for _, m := range cfg.Mounts {
		if m.Destination == "/tmp" {
			for _, o := range m.Options {
				if strings.HasPrefix(o, "size=") {
					return o
				}
			}
		}
	}
	return "size=" + strconv.Itoa(scratchDefault/1024) + "k"
}

// handOverWritable gives the job's writable directories to uid:gid on
// the host.
func handOverWritable(s Spec, uid, gid int) error {
	writable := []Mount{s.Output}
	if s.Checkpoint != nil {
		writable = append(writable, *s.Checkpoint)
	}
	for _, m := range writable {
		if err := handOver(m.Source, uid, gid); err != nil {
			return fmt.Errorf("%s: hand to job uid: %w", m.Target, err)
		}
	}
	return nil
}

// addLibraryPath appends dirs to the job's LD_LIBRARY_PATH: last, so that
// the image's own libraries keep precedence for everything but the
// driver's, which the image does not have.
func addLibraryPath(cfg *specs.Spec, dirs []string) {
	if len(dirs) == 0 {
		return
	}
	cur, _ := getEnv(cfg, "LD_LIBRARY_PATH")
	parts := slices.DeleteFunc(strings.Split(cur, ":"), func(p string) bool { return p == "" })
	for _, d := range dirs {
		if !slices.Contains(parts, d) {
			parts = append(parts, d)
		}
	}
	setEnv(cfg, "LD_LIBRARY_PATH", strings.Join(parts, ":"))
}

// libraryDirs are the directories of the shared libraries among mounts.
func libraryDirs(mounts []specs.Mount) []string {
	var dirs []string
	for _, m := range mounts {
		if m.Type == "bind" && strings.Contains(path.Base(m.Destination), ".so") && !slices.Contains(dirs, path.Dir(m.Destination)) {
			dirs = append(dirs, path.Dir(m.Destination))
		}
	}
	return dirs
}

func getEnv(cfg *specs.Spec, key string) (string, bool) {
	for _, kv := range cfg.Process.Env {
		if k, v, _ := strings.Cut(kv, "="); k == key {
			return v, true
		}
	}
	return "", false
}

func hasEnv(cfg *specs.Spec, key string) bool {
	_, ok := getEnv(cfg, key)
	return ok
}

// setEnv sets key in the job's environment, replacing any value.
func setEnv(cfg *specs.Spec, key, value string) {
	cfg.Process.Env = slices.DeleteFunc(cfg.Process.Env, func(kv string) bool {
		k, _, _ := strings.Cut(kv, "=")
		return k == key
	})
	cfg.Process.Env = append(cfg.Process.Env, key+"="+value)
	slices.Sort(cfg.Process.Env)
}
