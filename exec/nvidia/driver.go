package nvidia

import (
	"errors"

	"github.com/e31network/e31/exec"
)

// ErrNoDriver is wrapped by Inspect's error when NVML cannot be used: no
// driver, a driver that is not loaded or does not match its library, no
// permission, or a binary built without cgo. Such a machine has no GPUs to
// offer, which is an ordinary case rather than a fault.
var ErrNoDriver = errors.New("no usable NVIDIA driver")

// Driver is what NVML says of the installed driver.
type Driver struct {
	// Version is the kernel driver's version, e.g. "550.54.15"; empty when
	// NVML cannot tell.
	Version string
	// CUDA is the newest CUDA version the driver supports, e.g. "12.4".
	CUDA string
	// GPUs are the GPUs Discover would offer.
	GPUs []exec.GPU
}
