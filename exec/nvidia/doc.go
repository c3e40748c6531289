// Package nvidia finds a provider's NVIDIA GPUs through NVML.
//
// [Discover] asks NVML (through go-nvml, which loads libnvidia-ml.so.1 with
// dlopen at run time) for the machine's GPUs. A machine without the NVIDIA
// driver is an ordinary case, not an error: Discover reports zero GPUs and
// logs one line saying why. [Inspect] reports the same for a health check,
// with the driver and CUDA versions, and returns the reason as an error
// wrapping [ErrNoDriver]. Binaries built without cgo cannot load NVML and
// always report zero.
//
// It is a package of its own, apart from exec, because go-nvml is a cgo
// package whose header marks many calls deprecated: every program that
// imports it compiles that header and prints some thirty compiler warnings
// on its first build, unless CGO_CFLAGS carries
// -Wno-deprecated-declarations (a #cgo directive in an importing package
// does not reach go-nvml's own compilation). Only e31d needs GPUs from
// NVML; the node takes the discovery function from its main
// (node.Config.DiscoverGPUs), so that the e31 command, the test network
// and everything else that runs a sandbox build without cgo code of NVML.
package nvidia
