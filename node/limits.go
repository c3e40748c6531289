package node

import "github.com/e31network/e31/content"

// outputLimits are the caps on an output or checkpoint this node writes out
// for e31 get: its provider may be hostile, and a DAG of a few megabytes can
// describe a terabyte of zeros or a million empty files.
func (n *Node) outputLimits() content.Limits {
	return content.Limits{MaxBytes: n.cfg.MaxOutputBytes, MaxEntries: n.cfg.MaxEntries, MaxDepth: n.cfg.MaxDepth}
}
