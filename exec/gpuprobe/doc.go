// Package gpuprobe proves that the GPUs a process can see do real work: it
// runs a small CUDA kernel on each through the driver API and checks every
// element of the result.
//
// It is what `e31d gpu-probe` runs inside a sandbox for `e31d doctor
// --gpu-job`: seeing a GPU in NVML (exec/nvidia) says the host has it, not
// that a job in the sandbox can use it. That needs the device nodes, the
// driver's libraries and its JIT compiler to be there inside, which is what
// CDI or the runner's driver fallback must provide, so the probe goes as far
// as a job would: [Probe] loads libcuda.so.1, and for every device creates a
// context, allocates memory, compiles a kernel, copies data in, runs the
// kernel, copies the result back and verifies it.
//
// No CUDA toolkit is needed, to build or to run. libcuda.so.1 is the
// driver's own library, opened with dlopen at run time, so a binary built
// here runs on a machine without a driver and reports [ErrNoDriver]
// instead of failing to start. The kernel is PTX written by hand (probe.go),
// which the driver compiles for whatever GPU it finds: PTX for sm_50 runs on
// every GPU since Maxwell, so no compiler output for a particular
// architecture has to be shipped. Binaries built without cgo cannot call
// dlopen, and their probe always fails, saying so.
//
// The primary context is used (cuDevicePrimaryCtxRetain), as the CUDA
// runtime and so nearly every job does, rather than a context of the
// probe's own: what the probe proves is then what a PyTorch job would meet.
package gpuprobe
