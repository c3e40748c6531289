package gpuprobe

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"
)

// ErrNoDriver is wrapped by Probe's error when libcuda.so.1 cannot be
// loaded: no NVIDIA driver on the machine, or none visible to the process
// (a sandbox without the driver's libraries).
var ErrNoDriver = errors.New("no NVIDIA driver")

// libcuda is the soname the driver installs; the unversioned libcuda.so
// comes only with the toolkit's development files.
const libcuda = "libcuda.so.1"

// What the probe does on each device: allocBytes of device memory, the
// kernel's input at its start and its output at its middle, elements
// floats each, in blocks of blockSize threads.
const (
	allocBytes = 64 << 20
	elements   = 1 << 20
	blockSize  = 256
)

// Report is what the probe saw, as `e31d gpu-probe --json` prints it.
type Report struct {
	// CUDA is the newest CUDA version the driver supports, e.g. "12.4"
	// (cuDriverGetVersion); empty when the driver was not loaded.
	CUDA string `json:"cuda,omitempty"`
	// DeviceCount is what cuDeviceGetCount returned: in a sandbox, with
	// CUDAVisibleDevices empty, the number of GPUs injected.
	DeviceCount int `json:"device_count"`
	// CUDAVisibleDevices is CUDA_VISIBLE_DEVICES as the driver read it:
	// it hides every device it does not name.
	CUDAVisibleDevices string `json:"cuda_visible_devices,omitempty"`
	// Devices are the devices probed, one for each counted, in the
	// driver's order.
	Devices []Device `json:"devices"`
	// Error is Probe's error, if any.
	Error string `json:"error,omitempty"`
	// NoDriver says that Error wraps ErrNoDriver.
	NoDriver bool `json:"no_driver,omitempty"`
}

// Device is the probe of one device.
type Device struct {
	// Index is the device's ordinal as this process sees it (CUDA
	// renumbers the visible devices from 0).
	Index int    `json:"index"`
	Name  string `json:"name"`
	// UUID is as NVML and CUDA_VISIBLE_DEVICES write it: "GPU-" and
	// the UUID.
	UUID        string `json:"uuid"`
	MemoryBytes uint64 `json:"memory_bytes"`
	// AllocatedBytes is the device memory the probe allocated; 0 when
	// allocation failed.
	AllocatedBytes uint64 `json:"allocated_bytes"`
	// KernelOK says the kernel ran and every element of its output was
	// right.
	KernelOK bool `json:"kernel_ok"`
	// Elements is how many elements of the output were checked.
	Elements int `json:"elements"`
	// KernelTook is from the launch to the end of cuCtxSynchronize.
	KernelTook time.Duration `json:"kernel_ns"`
	// Took is the whole device's probe, context and JIT compilation
	// included.
	Took time.Duration `json:"took_ns"`
	// Error is what failed, naming the driver call.
	Error string `json:"error,omitempty"`
}

// OK reports whether the probe found at least one device and every device
// it found passed.
func (r Report) OK() bool {
	if r.Error != "" || len(r.Devices) == 0 {
		return false
	}
	for _, d := range r.Devices {
		if !d.KernelOK || d.Error != "" {
			return false
		}
	}
	return true
}

// CallError is a driver call that did not return CUDA_SUCCESS.
type CallError struct {
	// Call is the driver function, as exported (cuMemAlloc_v2).
	Call string
	// Code is the CUresult.
	Code int
	// Name and Text are cuGetErrorName's and cuGetErrorString's words for
	// Code, empty when the driver has none.
	Name, Text string
	// Log is the JIT compiler's error log, for cuModuleLoadDataEx.
	Log string
}

func (e *CallError) Error() string {
	s := fmt.Sprintf("%s: CUDA error %d", e.Call, e.Code)
	switch {
	case e.Name != "" && e.Text != "":
		s = fmt.Sprintf("%s: %s (%s)", e.Call, e.Name, e.Text)
	case e.Name != "":
		s = fmt.Sprintf("%s: %s", e.Call, e.Name)
	}
	if e.Log != "" {
		s += ": " + e.Log
	}
	return s
}

// Probe loads the driver and runs the kernel on every device this process
// can see. The report says what was seen even when the error is not nil;
// the error is the first device's failure, or the driver's, wrapping
// ErrNoDriver where libcuda.so.1 cannot be loaded. The driver's calls
// cannot be interrupted: ctx is checked between devices.
func Probe(ctx context.Context) (Report, error) {
	rep, err := probe(ctx, libcuda)
	rep.CUDAVisibleDevices = os.Getenv("CUDA_VISIBLE_DEVICES")
	if err == nil && rep.DeviceCount == 0 {
		err = errors.New("the driver reports no CUDA device")
	}
	if err != nil {
		rep.Error, rep.NoDriver = err.Error(), errors.Is(err, ErrNoDriver)
	}
	if rep.Devices == nil {
		rep.Devices = []Device{} // [] rather than null in the JSON
	}
	return rep, err
}

// cudaVersion writes cuDriverGetVersion's number (12040) as CUDA does
// (12.4).
func cudaVersion(v int) string { return fmt.Sprintf("%d.%d", v/1000, v%1000/10) }

// formatUUID writes a CUuuid's 16 bytes as NVML and CUDA_VISIBLE_DEVICES
// name the GPU.
func formatUUID(b [16]byte) string {
	return fmt.Sprintf("GPU-%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}

// kernelInput is the kernel's input: small integers, which a float32 and
// the kernel's arithmetic hold exactly, so that the output is checked for
// equality rather than within a tolerance.
func kernelInput(n int) []float32 {
	x := make([]float32, n)
	for i := range x {
		x[i] = float32(i % 65536)
	}
	return x
}

// checkOutput compares the kernel's output y with what it should be for
// input x, and returns how many elements were checked: all of them, or up
// to the first wrong one.
func checkOutput(x, y []float32) (int, error) {
	if len(x) != len(y) {
		return 0, fmt.Errorf("output has %d elements, want %d", len(y), len(x))
	}
	for i := range x {
		if want := x[i]*2 + 1; y[i] != want {
			return i + 1, fmt.Errorf("wrong result: element %d is %g, want %g (the kernel did not run, or ran wrongly)", i, y[i], want)
		}
	}
	return len(x), nil
}

// gridSize is how many blocks cover n elements.
func gridSize(n int) int { return (n + blockSize - 1) / blockSize }

// The kernel, y[i] = x[i]*2 + 1 for i < n, and what the launch passes it:
// kernelParams are the PTX types of its parameters, in order. The launch
// (probe_cgo.go) passes two device pointers (CUdeviceptr, 64 bits, hence
// .address_size 64) and the element count as an unsigned int; a test holds
// the PTX to these.
const kernelName = "e31_probe_scale"

var kernelParams = []string{".u64", ".u64", ".u32"}

// kernelPTX is PTX ISA 6.0 (CUDA 9 and later drivers) for sm_50: the
// driver compiles it for the GPU it runs on, Maxwell or newer. Each thread
// computes its global index from its block and thread ids, returns when it
// is past n, and otherwise converts the parameters' generic addresses to
// global ones and computes its element. fma with 2.0 and 1.0 on small
// integers is exact.
const kernelPTX = `.version 6.0
.target sm_50
.address_size 64

.visible .entry e31_probe_scale(
	.param .u64 e31_probe_scale_x,
	.param .u64 e31_probe_scale_y,
	.param .u32 e31_probe_scale_n
)
{
	.reg .pred	%p<2>;
	.reg .b32	%r<6>;
	.reg .f32	%f<3>;
	.reg .b64	%rd<8>;

	ld.param.u64	%rd1, [e31_probe_scale_x];
	ld.param.u64	%rd2, [e31_probe_scale_y];
	ld.param.u32	%r1, [e31_probe_scale_n];
	mov.u32	%r2, %ctaid.x;
	mov.u32	%r3, %ntid.x;
	mov.u32	%r4, %tid.x;
	mad.lo.s32	%r5, %r2, %r3, %r4;
	setp.ge.u32	%p1, %r5, %r1;
	@%p1 bra	DONE;
	cvta.to.global.u64	%rd3, %rd1;
	cvta.to.global.u64	%rd4, %rd2;
	mul.wide.u32	%rd5, %r5, 4;
	add.s64	%rd6, %rd3, %rd5;
	add.s64	%rd7, %rd4, %rd5;
	ld.global.f32	%f1, [%rd6];
	fma.rn.f32	%f2, %f1, 0f40000000, 0f3F800000;
	st.global.f32	[%rd7], %f2;
DONE:
	ret;
}
`
