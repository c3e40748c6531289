// A stand-in for libcuda.so.1 that runs the probe's kernel on the CPU, so
// that the probe's use of the driver API (symbols, argument order, the
// launch's parameter layout, error names, clean-up) is tested on machines
// without a GPU. Device memory is host memory; the "kernel" is the PTX's
// arithmetic written in C, run over the grid the launch asks for.
//
// Built by the tests with gcc -shared, without a soname, so that it can
// never be mistaken for the real libcuda.so.1 in the same process.
// Environment variables steer it, read at each call:
//   FAKECUDA_DEVICES  number of devices (default 1)
//   FAKECUDA_FAIL     name of a function (as exported) that fails with
//                     CUDA_ERROR_OUT_OF_MEMORY, or CUDA_ERROR_NO_DEVICE
//                     for cuInit
//   FAKECUDA_WRONG    when set, the kernel gets element 1000 wrong
//   FAKECUDA_LEAKS    when set, cuDevicePrimaryCtxRelease fails if the
//                     memory or module of the context was not freed first
// -DNO_UUID_V2 leaves out cuDeviceGetUuid_v2 (drivers before CUDA 11.4);
// -DNO_LAUNCH leaves out cuLaunchKernel.
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef int CUresult;
typedef int CUdevice;
typedef unsigned long long CUdeviceptr;
typedef void *CUcontext;
typedef void *CUmodule;
typedef void *CUfunction;
typedef void *CUstream;
typedef struct { char bytes[16]; } CUuuid;
typedef int CUjit_option;

enum {
	CUDA_SUCCESS = 0,
	CUDA_ERROR_INVALID_VALUE = 1,
	CUDA_ERROR_OUT_OF_MEMORY = 2,
	CUDA_ERROR_NOT_INITIALIZED = 3,
	CUDA_ERROR_NO_DEVICE = 100,
	CUDA_ERROR_INVALID_DEVICE = 101,
	CUDA_ERROR_INVALID_PTX = 218,
	CUDA_ERROR_INVALID_CONTEXT = 201,
	CUDA_ERROR_NOT_FOUND = 500,
};

static int initialised;
static int current = -1;    // device whose primary context is current
static int retained[16];
static int allocations;     // live cuMemAlloc blocks
static int modules;         // loaded, not unloaded

static int fails(const char *fn) {
	const char *f = getenv("FAKECUDA_FAIL");
	return f != NULL && strcmp(f, fn) == 0;
}

static int devices(void) {
	const char *n = getenv("FAKECUDA_DEVICES");
	return n != NULL ? atoi(n) : 1;
}

CUresult cuGetErrorName(CUresult r, const char **s) {
	switch (r) {
	case CUDA_SUCCESS: *s = "CUDA_SUCCESS"; return 0;
	case CUDA_ERROR_INVALID_VALUE: *s = "CUDA_ERROR_INVALID_VALUE"; return 0;
	case CUDA_ERROR_OUT_OF_MEMORY: *s = "CUDA_ERROR_OUT_OF_MEMORY"; return 0;
	case CUDA_ERROR_NOT_INITIALIZED: *s = "CUDA_ERROR_NOT_INITIALIZED"; return 0;
	case CUDA_ERROR_NO_DEVICE: *s = "CUDA_ERROR_NO_DEVICE"; return 0;
	case CUDA_ERROR_INVALID_DEVICE: *s = "CUDA_ERROR_INVALID_DEVICE"; return 0;
	case CUDA_ERROR_INVALID_PTX: *s = "CUDA_ERROR_INVALID_PTX"; return 0;
	case CUDA_ERROR_INVALID_CONTEXT: *s = "CUDA_ERROR_INVALID_CONTEXT"; return 0;
	case CUDA_ERROR_NOT_FOUND: *s = "CUDA_ERROR_NOT_FOUND"; return 0;
	}
	*s = NULL;
	return CUDA_ERROR_INVALID_VALUE;
}

CUresult cuGetErrorString(CUresult r, const char **s) {
	switch (r) {
	case CUDA_ERROR_OUT_OF_MEMORY: *s = "out of memory"; return 0;
	case CUDA_ERROR_NO_DEVICE: *s = "no CUDA-capable device is detected"; return 0;
	case CUDA_ERROR_INVALID_PTX: *s = "a PTX JIT compilation failed"; return 0;
	}
	*s = NULL;
	return CUDA_ERROR_INVALID_VALUE;
}

CUresult cuInit(unsigned int flags) {
	if (flags != 0) return CUDA_ERROR_INVALID_VALUE;
	if (fails("cuInit")) return CUDA_ERROR_NO_DEVICE;
	initialised = 1;
	return 0;
}

CUresult cuDriverGetVersion(int *v) {
	*v = 12040;
	return 0;
}

CUresult cuDeviceGetCount(int *n) {
	if (!initialised) return CUDA_ERROR_NOT_INITIALIZED;
	*n = devices();
	return 0;
}

CUresult cuDeviceGet(CUdevice *d, int i) {
	if (!initialised) return CUDA_ERROR_NOT_INITIALIZED;
	if (i < 0 || i >= devices()) return CUDA_ERROR_INVALID_DEVICE;
	*d = 100 + i; // not the ordinal, so that mixing the two is caught
	return 0;
}

static int ordinal(CUdevice d) {
	return d >= 100 && d < 100 + devices() ? d - 100 : -1;
}

CUresult cuDeviceGetName(char *name, int len, CUdevice d) {
	if (ordinal(d) < 0) return CUDA_ERROR_INVALID_DEVICE;
	snprintf(name, (size_t)len, "Fake GPU %d", ordinal(d));
	return 0;
}

CUresult cuDeviceTotalMem_v2(size_t *bytes, CUdevice d) {
	if (ordinal(d) < 0) return CUDA_ERROR_INVALID_DEVICE;
	*bytes = (size_t)80 << 30;
	return 0;
}

static CUresult uuid(CUuuid *u, CUdevice d) {
	if (ordinal(d) < 0) return CUDA_ERROR_INVALID_DEVICE;
	for (int i = 0; i < 16; i++) u->bytes[i] = (char)(0xf0 + i);
	u->bytes[15] = (char)ordinal(d);
	return 0;
}

CUresult cuDeviceGetUuid(CUuuid *u, CUdevice d) { return uuid(u, d); }
#ifndef NO_UUID_V2
CUresult cuDeviceGetUuid_v2(CUuuid *u, CUdevice d) { return uuid(u, d); }
#endif

CUresult cuDevicePrimaryCtxRetain(CUcontext *c, CUdevice d) {
	if (ordinal(d) < 0) return CUDA_ERROR_INVALID_DEVICE;
	retained[ordinal(d)]++;
	*c = (CUcontext)(uintptr_t)(0x1000 + ordinal(d));
	return 0;
}

CUresult cuDevicePrimaryCtxRelease_v2(CUdevice d) {
	if (ordinal(d) < 0 || retained[ordinal(d)] == 0) return CUDA_ERROR_INVALID_CONTEXT;
	if (getenv("FAKECUDA_LEAKS") != NULL && (allocations > 0 || modules > 0)) return CUDA_ERROR_INVALID_CONTEXT;
	retained[ordinal(d)]--;
	return 0;
}

CUresult cuCtxSetCurrent(CUcontext c) {
	if (c == NULL) {
		current = -1;
		return 0;
	}
	int o = (int)((uintptr_t)c - 0x1000);
	if (o < 0 || o >= devices() || retained[o] == 0) return CUDA_ERROR_INVALID_CONTEXT;
	current = o;
	return 0;
}

CUresult cuCtxSynchronize(void) { return current < 0 ? CUDA_ERROR_INVALID_CONTEXT : 0; }

CUresult cuMemAlloc_v2(CUdeviceptr *p, size_t n) {
	if (current < 0) return CUDA_ERROR_INVALID_CONTEXT;
	if (fails("cuMemAlloc_v2")) return CUDA_ERROR_OUT_OF_MEMORY;
	void *m = calloc(1, n);
	if (m == NULL) return CUDA_ERROR_OUT_OF_MEMORY;
	allocations++;
	*p = (CUdeviceptr)(uintptr_t)m;
	return 0;
}

CUresult cuMemFree_v2(CUdeviceptr p) {
	if (current < 0) return CUDA_ERROR_INVALID_CONTEXT;
	free((void *)(uintptr_t)p);
	allocations--;
	return 0;
}

CUresult cuMemcpyHtoD_v2(CUdeviceptr dst, const void *src, size_t n) {
	if (current < 0) return CUDA_ERROR_INVALID_CONTEXT;
	memcpy((void *)(uintptr_t)dst, src, n);
	return 0;
}

CUresult cuMemcpyDtoH_v2(void *dst, CUdeviceptr src, size_t n) {
	if (current < 0) return CUDA_ERROR_INVALID_CONTEXT;
	if (fails("cuMemcpyDtoH_v2")) return CUDA_ERROR_OUT_OF_MEMORY;
	memcpy(dst, (void *)(uintptr_t)src, n);
	return 0;
}

static const char *loaded; // the PTX of the one module the probe loads

CUresult cuModuleLoadDataEx(CUmodule *m, const void *image, unsigned int n, CUjit_option *opts, void **vals) {
	if (current < 0) return CUDA_ERROR_INVALID_CONTEXT;
	char *log = NULL;
	size_t size = 0;
	for (unsigned int i = 0; i < n; i++) {
		if (opts[i] == 5) log = vals[i];
		if (opts[i] == 6) size = (size_t)(uintptr_t)vals[i];
	}
	if (fails("cuModuleLoadDataEx") || strstr(image, ".version 6.0") == NULL) {
		if (log != NULL && size > 0) snprintf(log, size, "ptxas fatal   : fake compiler refused the PTX");
		return CUDA_ERROR_INVALID_PTX;
	}
	loaded = image;
	modules++;
	*m = (CUmodule)0x2000;
	return 0;
}

CUresult cuModuleGetFunction(CUfunction *f, CUmodule m, const char *name) {
	if (m != (CUmodule)0x2000) return CUDA_ERROR_INVALID_VALUE;
	char entry[256];
	snprintf(entry, sizeof entry, ".entry %s(", name);
	if (strstr(loaded, entry) == NULL) return CUDA_ERROR_NOT_FOUND;
	*f = (CUfunction)0x3000;
	return 0;
}

CUresult cuModuleUnload(CUmodule m) {
	if (m != (CUmodule)0x2000) return CUDA_ERROR_INVALID_VALUE;
	modules--;
	return 0;
}

#ifndef NO_LAUNCH
// The kernel's parameters are read as the PTX declares them: two 64-bit
// pointers and a 32-bit count.
CUresult cuLaunchKernel(CUfunction f, unsigned int gx, unsigned int gy, unsigned int gz,
	unsigned int bx, unsigned int by, unsigned int bz, unsigned int shared, CUstream s, void **params, void **extra) {
	if (current < 0) return CUDA_ERROR_INVALID_CONTEXT;
	if (f != (CUfunction)0x3000 || gy != 1 || gz != 1 || by != 1 || bz != 1 || bx == 0 || bx > 1024 || extra != NULL || params == NULL)
		return CUDA_ERROR_INVALID_VALUE;
	float *x = (float *)(uintptr_t)*(CUdeviceptr *)params[0];
	float *y = (float *)(uintptr_t)*(CUdeviceptr *)params[1];
	unsigned int n = *(unsigned int *)params[2];
	for (unsigned int b = 0; b < gx; b++) {
		for (unsigned int t = 0; t < bx; t++) {
			unsigned int i = b * bx + t;
			if (i >= n) continue;
			y[i] = x[i] * 2.0f + 1.0f;
		}
	}
	if (getenv("FAKECUDA_WRONG") != NULL && n > 1000) y[1000] = -1;
	return 0;
}
#endif
