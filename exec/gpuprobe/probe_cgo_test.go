//go:build cgo

package gpuprobe

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestProbeHere runs the probe on this machine. Without a driver it must
// say so, wrapping ErrNoDriver; with one, every device must pass.
func TestProbeHere(t *testing.T) {
	rep, err := Probe(context.Background())
	b, _ := json.Marshal(rep)
	t.Logf("report: %s", b)
	var ce *CallError
	switch {
	case errors.Is(err, ErrNoDriver):
		if !strings.Contains(err.Error(), "libcuda.so.1 not found") {
			t.Errorf("error %q does not say libcuda.so.1 was not found", err)
		}
		if !rep.NoDriver || rep.Error != err.Error() || rep.OK() || rep.Devices == nil {
			t.Errorf("report %+v: want no_driver, the error, and an empty device list", rep)
		}
		if !strings.Contains(string(b), `"devices":[]`) || !strings.Contains(string(b), `"no_driver":true`) {
			t.Errorf("JSON %s", b)
		}
	case errors.As(err, &ce) && ce.Call == "cuInit" && ce.Code == 100:
		t.Skipf("libcuda.so.1 is installed but sees no device: %v", err)
	case err != nil:
		t.Fatalf("the driver is here but the probe failed: %v", err)
	default:
		if !rep.OK() || rep.DeviceCount != len(rep.Devices) {
			t.Errorf("report %+v", rep)
		}
		for _, d := range rep.Devices {
			if d.Elements != elements || d.AllocatedBytes != allocBytes || !strings.HasPrefix(d.UUID, "GPU-") {
				t.Errorf("device %+v", d)
			}
		}
	}
}

// fakeDriver builds testdata/fakecuda.c with the given flags and returns
// its path.
func fakeDriver(t *testing.T, flags ...string) string {
	t.Helper()
	cc := os.Getenv("CC")
	if cc == "" {
		cc = "gcc"
	}
	if _, err := exec.LookPath(cc); err != nil {
		t.Skipf("no C compiler (%s) to build the fake driver", cc)
	}
	lib := filepath.Join(t.TempDir(), "libfakecuda.so")
	args := append([]string{"-shared", "-fPIC", "-O1", "-Wall", "-Werror", "-o", lib, "testdata/fakecuda.c"}, flags...)
	if out, err := exec.Command(cc, args...).CombinedOutput(); err != nil {
		t.Fatalf("build the fake driver: %v\n%s", err, out)
	}
	return lib
}

func TestProbeFakeDriver(t *testing.T) {
	lib := fakeDriver(t)
	t.Setenv("FAKECUDA_DEVICES", "2")
	// Release fails if the memory or module outlived the context.
	t.Setenv("FAKECUDA_LEAKS", "1")
	rep, err := probe(context.Background(), lib)
	if err != nil {
		t.Fatal(err)
	}
	if rep.CUDA != "12.4" || rep.DeviceCount != 2 || len(rep.Devices) != 2 {
		t.Fatalf("report %+v", rep)
	}
	for i, d := range rep.Devices {
		want := "GPU-f0f1f2f3-f4f5-f6f7-f8f9-fafbfcfdfe0" + string(rune('0'+i))
		if d.Index != i || d.Name != "Fake GPU "+string(rune('0'+i)) || d.UUID != want || d.MemoryBytes != 80<<30 ||
			d.AllocatedBytes != 64<<20 || !d.KernelOK || d.Elements != 1<<20 || d.Error != "" || d.Took <= 0 {
			t.Errorf("device %d: %+v, want uuid %s", i, d, want)
		}
	}
}

func TestProbeFakeDriverFailures(t *testing.T) {
	plain, old, noLaunch := fakeDriver(t), fakeDriver(t, "-DNO_UUID_V2"), fakeDriver(t, "-DNO_LAUNCH")
	for _, tc := range []struct {
		name, lib, env, val string
		// wantErr is in the error; device says whether a device was
		// reached, with allocated its allocation.
		wantErr   string
		device    bool
		allocated uint64
	}{
		{"no device", plain, "FAKECUDA_FAIL", "cuInit", "cuInit: CUDA_ERROR_NO_DEVICE (no CUDA-capable device is detected)", false, 0},
		{"out of memory", plain, "FAKECUDA_FAIL", "cuMemAlloc_v2", "device 0: cuMemAlloc_v2: CUDA_ERROR_OUT_OF_MEMORY (out of memory)", true, 0},
		{"JIT refuses", plain, "FAKECUDA_FAIL", "cuModuleLoadDataEx", "device 0: cuModuleLoadDataEx: CUDA_ERROR_INVALID_PTX (a PTX JIT compilation failed): ptxas fatal   : fake compiler refused the PTX", true, 64 << 20},
		{"copy back fails", plain, "FAKECUDA_FAIL", "cuMemcpyDtoH_v2", "device 0: cuMemcpyDtoH_v2: CUDA_ERROR_OUT_OF_MEMORY", true, 64 << 20},
		{"wrong result", plain, "FAKECUDA_WRONG", "1", "device 0: wrong result: element 1000 is -1, want 2001", true, 64 << 20},
		{"driver before CUDA 11.4", old, "", "", "", true, 64 << 20},
		{"driver without cuLaunchKernel", noLaunch, "", "", "has no cuLaunchKernel: the driver is too old", false, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("FAKECUDA_LEAKS", "1")
			if tc.env != "" {
				t.Setenv(tc.env, tc.val)
			}
			rep, err := probe(context.Background(), tc.lib)
			if tc.wantErr == "" {
				if err != nil || !rep.Devices[0].KernelOK {
					t.Fatalf("%v; %+v", err, rep)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("error %v, want %q", err, tc.wantErr)
			}
			if errors.Is(err, ErrNoDriver) {
				t.Errorf("%v is not a missing driver", err)
			}
			if !tc.device {
				if len(rep.Devices) != 0 {
					t.Errorf("devices %+v", rep.Devices)
				}
				return
			}
			d := rep.Devices[0]
			if d.KernelOK || d.Error == "" || !strings.Contains(err.Error(), d.Error) || d.AllocatedBytes != tc.allocated || d.UUID == "" {
				t.Errorf("device %+v", d)
			}
		})
	}
}

// TestProbeNoDriverAtPath checks the message for a library that is not
// there, whatever this machine has installed.
func TestProbeNoDriverAtPath(t *testing.T) {
	lib := filepath.Join(t.TempDir(), "libcuda.so.1")
	_, err := probe(context.Background(), lib)
	if !errors.Is(err, ErrNoDriver) || !strings.Contains(err.Error(), lib+" not found") {
		t.Errorf("error %v, want ErrNoDriver saying %s was not found", err, lib)
	}
	if err := os.WriteFile(lib, []byte("not a library"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = probe(context.Background(), lib)
	if !errors.Is(err, ErrNoDriver) || !strings.Contains(err.Error(), "cannot be loaded") {
		t.Errorf("error %v, want ErrNoDriver saying %s cannot be loaded", err, lib)
	}
}
