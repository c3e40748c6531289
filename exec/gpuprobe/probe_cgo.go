//go:build cgo

package gpuprobe

/*
#cgo LDFLAGS: -ldl
#include <dlfcn.h>
#include <stdint.h>
#include <stdlib.h>

// The driver API's types, as cuda.h declares them on a 64-bit host. They
// are written out here so that building needs no CUDA header: the enums
// (CUresult, CUjit_option) are int-sized, CUdevice is an int, and a
// device pointer is 64 bits wide.
typedef int CUresult;
typedef int CUdevice;
typedef unsigned long long CUdeviceptr;
typedef struct CUctx_st *CUcontext;
typedef struct CUmod_st *CUmodule;
typedef struct CUfunc_st *CUfunction;
typedef struct CUstream_st *CUstream;
typedef struct { char bytes[16]; } CUuuid;
typedef int CUjit_option;

// CUjit_option values: the buffer for the JIT compiler's error log, and
// its size.
enum { e31_CU_JIT_ERROR_LOG_BUFFER = 5, e31_CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES = 6 };

typedef CUresult (*e31_cuInit_t)(unsigned int);
typedef CUresult (*e31_cuIntOut_t)(int *);
typedef CUresult (*e31_cuDeviceGet_t)(CUdevice *, int);
typedef CUresult (*e31_cuDeviceGetName_t)(char *, int, CUdevice);
typedef CUresult (*e31_cuDeviceTotalMem_t)(size_t *, CUdevice);
typedef CUresult (*e31_cuDeviceGetUuid_t)(CUuuid *, CUdevice);
typedef CUresult (*e31_cuDevicePrimaryCtxRetain_t)(CUcontext *, CUdevice);
typedef CUresult (*e31_cuDevicePrimaryCtxRelease_t)(CUdevice);
typedef CUresult (*e31_cuCtxSetCurrent_t)(CUcontext);
typedef CUresult (*e31_cuCtxSynchronize_t)(void);
typedef CUresult (*e31_cuMemAlloc_t)(CUdeviceptr *, size_t);
typedef CUresult (*e31_cuMemFree_t)(CUdeviceptr);
typedef CUresult (*e31_cuMemcpyHtoD_t)(CUdeviceptr, const void *, size_t);
typedef CUresult (*e31_cuMemcpyDtoH_t)(void *, CUdeviceptr, size_t);
typedef CUresult (*e31_cuModuleLoadDataEx_t)(CUmodule *, const void *, unsigned int, CUjit_option *, void **);
typedef CUresult (*e31_cuModuleGetFunction_t)(CUfunction *, CUmodule, const char *);
typedef CUresult (*e31_cuModuleUnload_t)(CUmodule);
typedef CUresult (*e31_cuLaunchKernel_t)(CUfunction, unsigned int, unsigned int, unsigned int,
	unsigned int, unsigned int, unsigned int, unsigned int, CUstream, void **, void **);
typedef CUresult (*e31_cuGetErrorText_t)(CUresult, const char **);

// The functions the probe calls, by index into e31cu_fn.
enum {
	e31_cuInit, e31_cuDriverGetVersion, e31_cuDeviceGetCount, e31_cuDeviceGet,
	e31_cuDeviceGetName, e31_cuDeviceTotalMem, e31_cuDeviceGetUuid,
	e31_cuDevicePrimaryCtxRetain, e31_cuDevicePrimaryCtxRelease, e31_cuCtxSetCurrent,
	e31_cuCtxSynchronize, e31_cuMemAlloc, e31_cuMemFree, e31_cuMemcpyHtoD, e31_cuMemcpyDtoH,
	e31_cuModuleLoadDataEx, e31_cuModuleGetFunction, e31_cuModuleUnload, e31_cuLaunchKernel,
	e31_cuGetErrorName, e31_cuGetErrorString,
	e31_cuN
};

// e31cu_names are the exported names of each function, newest first. The
// _v2 entry points take 64-bit sizes and pointers; the unsuffixed ones of
// the same functions are the 32-bit ABI of CUDA 3.1 and must not be used.
// cuDeviceGetUuid_v2 (CUDA 11.4) and cuDevicePrimaryCtxRelease_v2 (11.0)
// fall back to their first versions, which do the same.
static const char *e31cu_names[e31_cuN][2] = {
	{"cuInit", 0}, {"cuDriverGetVersion", 0}, {"cuDeviceGetCount", 0}, {"cuDeviceGet", 0},
	{"cuDeviceGetName", 0}, {"cuDeviceTotalMem_v2", 0}, {"cuDeviceGetUuid_v2", "cuDeviceGetUuid"},
	{"cuDevicePrimaryCtxRetain", 0}, {"cuDevicePrimaryCtxRelease_v2", "cuDevicePrimaryCtxRelease"},
	{"cuCtxSetCurrent", 0}, {"cuCtxSynchronize", 0}, {"cuMemAlloc_v2", 0}, {"cuMemFree_v2", 0},
	{"cuMemcpyHtoD_v2", 0}, {"cuMemcpyDtoH_v2", 0}, {"cuModuleLoadDataEx", 0},
	{"cuModuleGetFunction", 0}, {"cuModuleUnload", 0}, {"cuLaunchKernel", 0},
	{"cuGetErrorName", 0}, {"cuGetErrorString", 0},
};
static void *e31cu_fn[e31_cuN];
static int e31cu_which[e31_cuN];

// e31cu_open opens the driver's library and returns NULL, or dlerror's
// message. The library is never closed: the driver starts threads and
// registers exit handlers that must outlive any unload.
static const char *e31cu_open(const char *lib) {
	void *h = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
	if (h == NULL) {
		const char *err = dlerror();
		return err != NULL ? err : "dlopen failed";
	}
	for (int i = 0; i < e31_cuN; i++) {
		e31cu_fn[i] = NULL;
		for (int j = 0; j < 2 && e31cu_names[i][j] != NULL; j++) {
			void *p = dlsym(h, e31cu_names[i][j]);
			if (p != NULL) {
				e31cu_fn[i] = p;
				e31cu_which[i] = j;
				break;
			}
		}
	}
	return NULL;
}

// e31cu_missing is the index of the first function the library lacks, or
// -1.
static int e31cu_missing(void) {
	for (int i = 0; i < e31_cuN; i++) {
		if (e31cu_fn[i] == NULL) return i;
	}
	return -1;
}

// e31cu_name is the name of function i as resolved (its first name when
// none was).
static const char *e31cu_name(int i) { return e31cu_names[i][e31cu_fn[i] != NULL ? e31cu_which[i] : 0]; }

#define E31CU(i, type) ((type)e31cu_fn[i])

static CUresult e31cuInit(void) { return E31CU(e31_cuInit, e31_cuInit_t)(0); }
static CUresult e31cuDriverGetVersion(int *v) { return E31CU(e31_cuDriverGetVersion, e31_cuIntOut_t)(v); }
static CUresult e31cuDeviceGetCount(int *n) { return E31CU(e31_cuDeviceGetCount, e31_cuIntOut_t)(n); }
static CUresult e31cuDeviceGet(CUdevice *d, int i) { return E31CU(e31_cuDeviceGet, e31_cuDeviceGet_t)(d, i); }
static CUresult e31cuDeviceGetName(char *name, int len, CUdevice d) {
	return E31CU(e31_cuDeviceGetName, e31_cuDeviceGetName_t)(name, len, d);
}
static CUresult e31cuDeviceTotalMem(size_t *bytes, CUdevice d) {
	return E31CU(e31_cuDeviceTotalMem, e31_cuDeviceTotalMem_t)(bytes, d);
}
static CUresult e31cuDeviceGetUuid(unsigned char *out, CUdevice d) {
	CUuuid u;
	CUresult r = E31CU(e31_cuDeviceGetUuid, e31_cuDeviceGetUuid_t)(&u, d);
	for (int i = 0; i < 16; i++) out[i] = (unsigned char)u.bytes[i];
	return r;
}
static CUresult e31cuDevicePrimaryCtxRetain(CUcontext *c, CUdevice d) {
	return E31CU(e31_cuDevicePrimaryCtxRetain, e31_cuDevicePrimaryCtxRetain_t)(c, d);
}
static CUresult e31cuDevicePrimaryCtxRelease(CUdevice d) {
	return E31CU(e31_cuDevicePrimaryCtxRelease, e31_cuDevicePrimaryCtxRelease_t)(d);
}
static CUresult e31cuCtxSetCurrent(CUcontext c) { return E31CU(e31_cuCtxSetCurrent, e31_cuCtxSetCurrent_t)(c); }
static CUresult e31cuCtxSynchronize(void) { return E31CU(e31_cuCtxSynchronize, e31_cuCtxSynchronize_t)(); }
static CUresult e31cuMemAlloc(CUdeviceptr *p, size_t n) { return E31CU(e31_cuMemAlloc, e31_cuMemAlloc_t)(p, n); }
static CUresult e31cuMemFree(CUdeviceptr p) { return E31CU(e31_cuMemFree, e31_cuMemFree_t)(p); }
static CUresult e31cuMemcpyHtoD(CUdeviceptr dst, const void *src, size_t n) {
	return E31CU(e31_cuMemcpyHtoD, e31_cuMemcpyHtoD_t)(dst, src, n);
}
static CUresult e31cuMemcpyDtoH(void *dst, CUdeviceptr src, size_t n) {
	return E31CU(e31_cuMemcpyDtoH, e31_cuMemcpyDtoH_t)(dst, src, n);
}

// e31cuModuleLoad compiles the PTX image, with the JIT compiler's errors
// written to log: without it a typo in the PTX or a driver too old for
// its version is only CUDA_ERROR_INVALID_PTX.
static CUresult e31cuModuleLoad(CUmodule *m, const char *image, char *log, unsigned int logSize) {
	CUjit_option opts[2] = {e31_CU_JIT_ERROR_LOG_BUFFER, e31_CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES};
	void *vals[2] = {log, (void *)(uintptr_t)logSize};
	return E31CU(e31_cuModuleLoadDataEx, e31_cuModuleLoadDataEx_t)(m, image, 2, opts, vals);
}
static CUresult e31cuModuleGetFunction(CUfunction *f, CUmodule m, const char *name) {
	return E31CU(e31_cuModuleGetFunction, e31_cuModuleGetFunction_t)(f, m, name);
}
static CUresult e31cuModuleUnload(CUmodule m) { return E31CU(e31_cuModuleUnload, e31_cuModuleUnload_t)(m); }

// e31cuLaunch runs the kernel with its three parameters (kernelParams in
// probe.go): the input and output pointers and the element count, on the
// default stream.
static CUresult e31cuLaunch(CUfunction f, unsigned int grid, unsigned int block, CUdeviceptr x, CUdeviceptr y, unsigned int n) {
	void *args[3] = {&x, &y, &n};
	return E31CU(e31_cuLaunchKernel, e31_cuLaunchKernel_t)(f, grid, 1, 1, block, 1, 1, 0, NULL, args, NULL);
}

static const char *e31cuErrorName(CUresult r) {
	const char *s = NULL;
	if (E31CU(e31_cuGetErrorName, e31_cuGetErrorText_t)(r, &s) != 0) return NULL;
	return s;
}
static const char *e31cuErrorString(CUresult r) {
	const char *s = NULL;
	if (E31CU(e31_cuGetErrorString, e31_cuGetErrorText_t)(r, &s) != 0) return NULL;
	return s;
}
*/
import "C"

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"time"
	"unsafe"
)

// mu serialises probes: the library's function table is one per process,
// and the driver's current context is per thread.
var mu sync.Mutex

// probe runs the probe with the library at lib, a soname or a path.
func probe(ctx context.Context, lib string) (Report, error) {
	mu.Lock()
	defer mu.Unlock()
	var rep Report
	clib := C.CString(lib)
	defer C.free(unsafe.Pointer(clib))
	if msg := C.e31cu_open(clib); msg != nil {
		text := C.GoString(msg)
		if strings.Contains(text, "No such file") {
			return rep, fmt.Errorf("%w: %s not found (%s)", ErrNoDriver, lib, text)
		}
		return rep, fmt.Errorf("%w: %s cannot be loaded: %s", ErrNoDriver, lib, text)
	}
	if i := C.e31cu_missing(); i >= 0 {
		// A driver older than CUDA 6, or not NVIDIA's libcuda at all.
		return rep, fmt.Errorf("%s has no %s: the driver is too old", lib, C.GoString(C.e31cu_name(i)))
	}
	if err := check(C.e31_cuInit, C.e31cuInit()); err != nil {
		return rep, err
	}
	var version, count C.int
	if err := check(C.e31_cuDriverGetVersion, C.e31cuDriverGetVersion(&version)); err != nil {
		return rep, err
	}
	rep.CUDA = cudaVersion(int(version))
	if err := check(C.e31_cuDeviceGetCount, C.e31cuDeviceGetCount(&count)); err != nil {
		return rep, err
	}
	rep.DeviceCount = int(count)
	var first error
	for i := range rep.DeviceCount {
		if err := ctx.Err(); err != nil {
			return rep, err
		}
		d, err := probeDevice(i)
		rep.Devices = append(rep.Devices, d)
		if err != nil && first == nil {
			first = fmt.Errorf("device %d: %w", i, err)
		}
	}
	return rep, first
}

// probeDevice runs the kernel on device i. The device's description is
// filled in as far as it was read, also on failure.
func probeDevice(i int) (d Device, err error) {
	// The context is current to this thread only.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	start := time.Now()
	d.Index = i
	defer func() {
		d.Took = time.Since(start)
		if err != nil {
			d.Error = err.Error()
		}
	}()
	// later keeps the first error: a cleanup that fails after a failure
	// is its consequence, and after a success it is news.
	later := func(e error) {
		if err == nil {
			err = e
		}
	}

	var dev C.CUdevice
	if err := check(C.e31_cuDeviceGet, C.e31cuDeviceGet(&dev, C.int(i))); err != nil {
		return d, err
	}
	var name [256]C.char
	if err := check(C.e31_cuDeviceGetName, C.e31cuDeviceGetName(&name[0], C.int(len(name)), dev)); err != nil {
		return d, err
	}
	d.Name = C.GoString(&name[0])
	var uuid [16]C.uchar
	if err := check(C.e31_cuDeviceGetUuid, C.e31cuDeviceGetUuid(&uuid[0], dev)); err != nil {
		return d, err
	}
	var raw [16]byte
	for j, b := range uuid {
		raw[j] = byte(b)
	}
	d.UUID = formatUUID(raw)
	var total C.size_t
	if err := check(C.e31_cuDeviceTotalMem, C.e31cuDeviceTotalMem(&total, dev)); err != nil {
		return d, err
	}
	d.MemoryBytes = uint64(total)

	var cctx C.CUcontext
	if err := check(C.e31_cuDevicePrimaryCtxRetain, C.e31cuDevicePrimaryCtxRetain(&cctx, dev)); err != nil {
		return d, err
	}
	defer func() { later(check(C.e31_cuDevicePrimaryCtxRelease, C.e31cuDevicePrimaryCtxRelease(dev))) }()
	if err := check(C.e31_cuCtxSetCurrent, C.e31cuCtxSetCurrent(cctx)); err != nil {
		return d, err
	}
	defer func() { later(check(C.e31_cuCtxSetCurrent, C.e31cuCtxSetCurrent(nil))) }()

	var mem C.CUdeviceptr
	if err := check(C.e31_cuMemAlloc, C.e31cuMemAlloc(&mem, allocBytes)); err != nil {
		return d, err
	}
	defer func() { later(check(C.e31_cuMemFree, C.e31cuMemFree(mem))) }()
	d.AllocatedBytes = allocBytes
	x, y := mem, mem+allocBytes/2

	image := C.CString(kernelPTX)
	defer C.free(unsafe.Pointer(image))
	const logSize = 4096
	log := (*C.char)(C.calloc(logSize, 1))
	defer C.free(unsafe.Pointer(log))
	var mod C.CUmodule
	if r := C.e31cuModuleLoad(&mod, image, log, logSize); r != 0 {
		err := check(C.e31_cuModuleLoadDataEx, r)
		err.(*CallError).Log = strings.TrimSpace(C.GoString(log))
		return d, err
	}
	defer func() { later(check(C.e31_cuModuleUnload, C.e31cuModuleUnload(mod))) }()
	var fn C.CUfunction
	cname := C.CString(kernelName)
	defer C.free(unsafe.Pointer(cname))
	if err := check(C.e31_cuModuleGetFunction, C.e31cuModuleGetFunction(&fn, mod, cname)); err != nil {
		return d, err
	}

	in := kernelInput(elements)
	size := C.size_t(len(in) * 4)
	if err := check(C.e31_cuMemcpyHtoD, C.e31cuMemcpyHtoD(x, unsafe.Pointer(&in[0]), size)); err != nil {
		return d, err
	}
	launched := time.Now()
	if err := check(C.e31_cuLaunchKernel, C.e31cuLaunch(fn, C.uint(gridSize(len(in))), blockSize, x, y, C.uint(len(in)))); err != nil {
		return d, err
	}
	// A fault in the kernel is reported here, not by the launch.
	if err := check(C.e31_cuCtxSynchronize, C.e31cuCtxSynchronize()); err != nil {
		return d, err
	}
	d.KernelTook = time.Since(launched)
	out := make([]float32, len(in))
	if err := check(C.e31_cuMemcpyDtoH, C.e31cuMemcpyDtoH(unsafe.Pointer(&out[0]), y, size)); err != nil {
		return d, err
	}
	n, err := checkOutput(in, out)
	d.Elements = n
	if err != nil {
		return d, err
	}
	d.KernelOK = true
	return d, nil
}

// check turns the result of function fn into an error naming it, nil for
// CUDA_SUCCESS. The result is a *CallError when not nil.
func check(fn C.int, r C.CUresult) error {
	if r == 0 {
		return nil
	}
	e := &CallError{Call: C.GoString(C.e31cu_name(fn)), Code: int(r)}
	if s := C.e31cuErrorName(r); s != nil {
		e.Name = C.GoString(s)
	}
	if s := C.e31cuErrorString(r); s != nil {
		e.Text = C.GoString(s)
	}
	return e
}
