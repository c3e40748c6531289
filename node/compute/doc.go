// Package compute is what a node computes with: the GPUs it found (real
// ones through the caller's discovery, or simulated ones), the OCI sandbox
// it runs jobs in (exec.Runner, and the run directory under /run it keeps
// its state in), whether that sandbox runs jobs in their own image, the
// filesystems that bound what a job writes, and how the GPUs are checked
// again before each run.
//
// A node without GPUs, or without a working OCI runtime, offers no compute
// but still submits, fetches and verifies: Open then returns a Machine
// with no Runner, and says why in the log, with a hint at the fix.
package compute
