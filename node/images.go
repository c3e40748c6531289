package node

import "github.com/e31network/e31/node/provider"

// imageRunner is what a sandbox says about running jobs in their own image
// (exec.Runner); a runner without these methods runs none.
type imageRunner interface {
	ImageSupport() error
	GPUInjection() string
}

// logImageSupport says at start whether this node runs image jobs and how
// GPUs reach a job, and returns the first.
func (n *Node) logImageSupport() bool {
	if n.runner == nil {
		return false
	}
	ir, ok := n.runner.(imageRunner)
	if !ok {
		n.log.Info("image jobs do not run here: the sandbox cannot run images")
		return false
	}
	if err := ir.ImageSupport(); err != nil {
		n.log.Warn("image jobs do not run here; this node offers only jobs on the host's root", "err", err, "gpu_injection", ir.GPUInjection())
		if n.cfg.RequireImage {
			n.log.Warn("--require-image is set but images cannot run here: no job will be matched to this node")
		}
		return false
	}
	n.log.Info("image jobs run here", "gpu_injection", ir.GPUInjection(), "layer_cache_bytes", n.cfg.ImageCacheBytes,
		"pull", n.cfg.ImagePull, "require_image", n.cfg.RequireImage)
	return true
}

// providerImages is the provider's image dependency: the library where
// image jobs run, none elsewhere.
func providerImages(n *Node) provider.Images {
	if !n.imagesRun {
		return nil
	}
	return n.images
}
