package exec

import "strings"

// GPU is one GPU a provider can lease, real or simulated.
type GPU struct {
	// Index is the GPU's position on this machine, as NVML numbers it.
	Index int
	// UUID is "GPU-" followed by a UUID; it names the GPU in
	// CUDA_VISIBLE_DEVICES, so a job sees the same GPU whatever its index.
	UUID string
	// Model is the product name ("NVIDIA H200 141GB HBM3e", or the name
	// given in a simulation spec).
	Model string
	// MemoryBytes is the GPU's total memory.
	MemoryBytes uint64
	// Simulated GPUs exist only for test networks: no device node is
	// mounted for them.
	Simulated bool
	// Minor is the device minor number: the GPU's node is /dev/nvidia<Minor>.
	// It is -1 for a simulated GPU.
	Minor int
}

// visibleDevices is the value of CUDA_VISIBLE_DEVICES and
// NVIDIA_VISIBLE_DEVICES for gpus. UUIDs rather than indices, because
// inside the sandbox the leased GPUs are the only ones and their indices
// would be renumbered from zero.
func visibleDevices(gpus []GPU) string {
	ids := make([]string, len(gpus))
	for i, g := range gpus {
		ids[i] = g.UUID
	}
	return strings.Join(ids, ",")
}
