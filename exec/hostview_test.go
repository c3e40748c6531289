package exec

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	specs "github.com/opencontainers/runtime-spec/specs-go"
)

// fakeGPUProc makes a driver's GPU list like /proc/driver/nvidia/gpus, one
// folder per GPU named by a PCI address, each with its information file.
func fakeGPUProc(t *testing.T, gpus []GPU) string {
	t.Helper()
	dir := t.TempDir()
	for i, g := range gpus {
		entry := filepath.Join(dir, gpuBus(i))
		must(t, os.Mkdir(entry, 0o755))
		info := fmt.Sprintf("Model: \t\t %s\nIRQ:   \t\t 42\nGPU UUID: \t %s\nBus Location: \t %s\nDevice Minor: \t %d\nGPU Excluded:\t No\n",
			g.Model, g.UUID, gpuBus(i), i)
		must(t, os.WriteFile(filepath.Join(entry, "information"), []byte(info), 0o444))
	}
	return dir
}

// gpuBus is the PCI address of fake GPU i.
func gpuBus(i int) string { return fmt.Sprintf("0000:%02x:00.0", i+1) }

// TestOtherGPUEntriesMasked: on a provider with two GPUs, a job leased one
// has the other's /proc/driver/nvidia/gpus entry masked and not its own;
// one leased none has both masked; where the driver lists none (simulated
// GPUs) nothing is.
func TestOtherGPUEntriesMasked(t *testing.T) {
	gpus, err := ParseSimSpec("2xH100:80GiB", "12D3KooWtest")
	if err != nil {
		t.Fatal(err)
	}
	proc := fakeGPUProc(t, gpus)
	entry := func(i int) string { return gpuProcDir + "/" + gpuBus(i) }

	r := &Runner{host: hostLayout{gpuProc: proc}}
	for _, c := range []struct {
		name   string
		leased []GPU
		want   []string
	}{
		{"GPU 0", gpus[:1], []string{entry(1)}},
		{"GPU 1", gpus[1:], []string{entry(0)}},
		{"both", gpus, nil},
		{"none", nil, []string{entry(0), entry(1)}},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := testSpec(t, "", "true")
			s.GPUs = c.leased
			cfg := sandboxConfig(s, "c", testHost(false), nil)
			if err := r.limitHost(cfg, s); err != nil {
				t.Fatal(err)
			}
			var masked []string
			for _, p := range cfg.Linux.MaskedPaths {
				if strings.HasPrefix(p, gpuProcDir+"/") {
					masked = append(masked, p)
				}
			}
			if !slices.Equal(masked, c.want) {
				t.Errorf("masked %v, want %v", masked, c.want)
			}
		})
	}

	// A real GPU whose entry names no UUID is known by its minor; an
	// entry that cannot be read is masked.
	must(t, os.WriteFile(filepath.Join(proc, gpuBus(0), "information"), []byte("Device Minor: \t 7\n"), 0o444))
	must(t, os.Mkdir(filepath.Join(proc, "0000:09:00.0"), 0o755))
	got, err := otherGPUEntries(proc, []GPU{{UUID: "GPU-real", Minor: 7}})
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{entry(1), gpuProcDir + "/0000:09:00.0"}; !slices.Equal(got, want) {
		t.Errorf("masked %v, want %v", got, want)
	}
	if got, err := otherGPUEntries(filepath.Join(proc, "missing"), nil); err != nil || got != nil {
		t.Errorf("no driver: %v, %v", got, err)
	}
}

// TestHostMasks: /proc/diskstats and DMI are masked along with runc's
// defaults, with and without an image.
func TestHostMasks(t *testing.T) {
	s := testSpec(t, "", "true")
	cfg := sandboxConfig(s, "c", testHost(false), nil)
	for _, p := range []string{"/proc/kcore", "/proc/keys", "/proc/diskstats", "/sys/firmware", "/sys/class/dmi", "/sys/devices/virtual/dmi", "/sys/devices/virtual/powercap"} {
		if !slices.Contains(cfg.Linux.MaskedPaths, p) {
			t.Errorf("%s not masked", p)
		}
	}
}

// TestBlockIO: a job gets the weight the host's cgroups offer, and the
// bandwidth and IOPS limits on its disk's device where they can throttle;
// neither without support, nor limits without a disk.
func TestBlockIO(t *testing.T) {
	limit := diskIOLimit{bandwidth: 8 << 20, iops: 100}
	// A directory with something mounted on it, whose device stands in
	// for a disk's: /proc, /sys or /dev, whichever is a mount here.
	var disk *Disk
	for _, p := range []string{"/proc", "/sys", "/dev"} {
		if _, err := diskDevice(p); err == nil {
			disk = &Disk{Path: p, Bytes: 1 << 20}
			break
		}
	}
	if disk == nil {
		t.Skip("no mount point to stand in for a disk")
	}
	dev, _ := diskDevice(disk.Path)

	b, err := blockIO(ioSupport{weight: 50, throttle: true}, disk, limit)
	if err != nil {
		t.Fatal(err)
	}
	if b.Weight == nil || *b.Weight != 50 {
		t.Errorf("weight %v", b.Weight)
	}
	for name, rules := range map[string][]specs.LinuxThrottleDevice{
		"read bps": b.ThrottleReadBpsDevice, "write bps": b.ThrottleWriteBpsDevice,
		"read iops": b.ThrottleReadIOPSDevice, "write iops": b.ThrottleWriteIOPSDevice,
	} {
		want := limit.bandwidth
		if strings.HasSuffix(name, "iops") {
			want = limit.iops
		}
		if len(rules) != 1 || rules[0].LinuxBlockIODevice != dev || rules[0].Rate != want {
			t.Errorf("%s: %+v, want %d on %d:%d", name, rules, want, dev.Major, dev.Minor)
		}
	}
	if b, err := blockIO(ioSupport{throttle: true}, nil, limit); b != nil || err != nil {
		t.Errorf("no disk: %+v, %v", b, err)
	}
	if b, err := blockIO(ioSupport{}, disk, limit); b != nil || err != nil {
		t.Errorf("no support: %+v, %v", b, err)
	}
	if b, _ := blockIO(ioSupport{weight: 250}, disk, limit); b == nil || *b.Weight != 250 || b.ThrottleWriteBpsDevice != nil {
		t.Errorf("weight alone: %+v", b)
	}
	// A disk that is not mounted is a spec the runner refuses.
	if _, err := blockIO(ioSupport{throttle: true}, &Disk{Path: t.TempDir(), Bytes: 1 << 20}, limit); err == nil {
		t.Error("a disk with nothing mounted was throttled")
	}
}
