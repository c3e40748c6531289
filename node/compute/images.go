package compute

// imageRunner is what a sandbox says about running jobs in their own image
// (exec.Runner); a runner without these methods runs none.
type imageRunner interface {
	ImageSupport() error
	GPUInjection() string
}

// ImageSettings are what the log of image support reports beside the
// sandbox's own answer (node.Config).
type ImageSettings struct {
	CacheBytes   int64
	Pull         bool
	RequireImage bool
}

// RunsImages says at start whether this node runs image jobs and how GPUs
// reach a job, and returns the first.
func (m *Machine) RunsImages(s ImageSettings) bool {
	if m.Runner == nil {
		return false
	}
	log := m.o.Log
	ir, ok := m.Runner.(imageRunner)
	if !ok {
		log.Info("image jobs do not run here: the sandbox cannot run images")
		return false
	}
	if err := ir.ImageSupport(); err != nil {
		log.Warn("image jobs do not run here; this node offers only jobs on the host's root", "err", err, "gpu_injection", ir.GPUInjection())
		if s.RequireImage {
			log.Warn("--require-image is set but images cannot run here: no job will be matched to this node")
		}
		return false
	}
	log.Info("image jobs run here", "gpu_injection", ir.GPUInjection(), "layer_cache_bytes", s.CacheBytes,
		"pull", s.Pull, "require_image", s.RequireImage)
	return true
}
