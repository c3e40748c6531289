package market

import (
	"fmt"
	"path"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Verify asks the submitter to check a job's results by running its work
// again elsewhere and comparing what came back (docs/using.md, "Trusting
// results"). Like Labels, it stays on the submitter's node: it is taken
// out of what is signed and broadcast, so that no provider can tell a
// job that will be checked, or a run that checks another, from any other.
type Verify struct {
	// Replicas runs a job, or each task of an array, on this many
	// distinct providers (2 or 3) and compares their outputs; with 2 that
	// disagree, a third runs and the majority wins.
	Replicas int `json:"replicas,omitempty" yaml:"replicas,omitempty"`
	// Spot runs again, on another provider, this share (0 < spot ≤ 1) of
	// an array's tasks, each drawn once the task has completed.
	Spot float64 `json:"spot,omitempty" yaml:"spot,omitempty"`
	// Compare says what of the outputs is compared; nil: the whole output
	// folder's CID.
	Compare *Compare `json:"compare,omitempty" yaml:"compare,omitempty"`
	// MinRecord places the job only on providers this node has seen
	// complete at least this many leases (its own ledger's word).
	MinRecord int `json:"min_record,omitempty" yaml:"min_record,omitempty"`
}

// Compare names what of two outputs must match: some of their files, or
// the verdict of the user's own comparator.
type Compare struct {
	// Paths are files or folders inside the output folder (relative,
	// such as metrics.json or model/): only their CIDs are compared, for
	// outputs that also carry timestamps or hostnames.
	Paths []string `json:"paths,omitempty" yaml:"paths,omitempty"`
	// Command runs as a small job over two replicas' outputs, mounted at
	// /a and /b: exit status 0 means they agree (a numeric tolerance, say).
	Command []string `json:"command,omitempty" yaml:"command,omitempty"`
	// Image is the comparator's software; empty: the provider's base root.
	Image string `json:"image,omitempty" yaml:"image,omitempty"`
}

// Bounds of the verify section.
const (
	MinReplicas     = 2
	MaxReplicas     = 3
	MaxComparePaths = 16
	MaxMinRecord    = 1_000_000
)

// Checks reports whether the section asks for any check of results.
func (v *Verify) Checks() bool { return v != nil && (v.Replicas > 1 || v.Spot > 0) }

// Mode names what is compared, as a verdict records it: "output",
// "paths:a,b" or "command".
func (v *Verify) Mode() string {
	switch {
	case v == nil || v.Compare == nil:
		return "output"
	case len(v.Compare.Command) > 0:
		return "command"
	case len(v.Compare.Paths) > 0:
		return "paths:" + strings.Join(v.Compare.Paths, ",")
	}
	return "output"
}

func (dc *decoder) verify(n *yaml.Node, field string) *Verify {
	var v Verify
	dc.fields(n, field, "a mapping with replicas, spot, compare and min_record", func(key, f string, val *yaml.Node) {
		switch key {
		case "replicas":
			v.Replicas, _ = dc.int(val, f)
		case "spot":
			v.Spot, _ = parsed(dc, val, f, "a share such as 0.05", "", parseShare)
		case "min_record":
			v.MinRecord, _ = dc.int(val, f)
		case "compare":
			if s := dc.section(val, f); s != nil {
				v.Compare = dc.compare(s, f)
			}
		default:
			dc.unknown(f, "replicas, spot, compare, min_record")
		}
	})
	return &v
}

func (dc *decoder) compare(n *yaml.Node, field string) *Compare {
	var c Compare
	dc.fields(n, field, "a mapping with paths, or command and image", func(key, f string, v *yaml.Node) {
		switch key {
		case "paths":
			c.Paths = dc.strings(v, f)
		case "command":
			c.Command = dc.strings(v, f)
		case "image":
			c.Image, _ = dc.str(v, f)
		default:
			dc.unknown(f, "paths, command, image")
		}
	})
	return &c
}

// parseShare reads a share of tasks: a number in (0, 1], or a percentage
// such as 5%.
func parseShare(s string) (float64, error) {
	pct := strings.HasSuffix(s, "%")
	f, err := strconv.ParseFloat(strings.TrimSuffix(s, "%"), 64)
	if err != nil {
		return 0, fmt.Errorf("%q is not a number", s)
	}
	if pct {
		f /= 100
	}
	if !(f > 0 && f <= 1) {
		return 0, fmt.Errorf("%s is not within (0, 1]", s)
	}
	return f, nil
}

// ParseShare reads a share of tasks as --spot takes it: 0.05 or 5%.
func ParseShare(s string) (float64, error) { return parseShare(s) }

// validateVerify appends a problem for each rule the verify section of d
// breaks.
func validateVerify(d *Declaration, ps *problems) {
	v := d.Verify
	if v == nil {
		return
	}
	switch {
	case v.Replicas != 0 && (v.Replicas < MinReplicas || v.Replicas > MaxReplicas):
		ps.add("verify.replicas", "must be %d or %d, not %d", MinReplicas, MaxReplicas, v.Replicas)
	case v.Replicas != 0 && d.Request.Gang():
		ps.add("verify.replicas", "cannot be set with request.nodes: a gang's replicas are not supported")
	}
	switch {
	case v.Spot < 0 || v.Spot > 1 || v.Spot != v.Spot:
		ps.add("verify.spot", "must be a share within (0, 1], such as 0.05")
	case v.Spot > 0 && d.Array == nil:
		ps.add("verify.spot", "needs an array: a single job is checked with verify.replicas")
	case v.Spot > 0 && d.Request.Gang():
		ps.add("verify.spot", "cannot be set with request.nodes: a gang's parts are not checked one by one")
	}
	if v.MinRecord < 0 || v.MinRecord > MaxMinRecord {
		ps.add("verify.min_record", "must be within 0 and %d", MaxMinRecord)
	}
	if c := v.Compare; c != nil {
		if !v.Checks() {
			ps.add("verify.compare", "needs verify.replicas or verify.spot: nothing runs twice to compare")
		}
		switch {
		case len(c.Paths) > 0 && len(c.Command) > 0:
			ps.add("verify.compare", "takes paths or command, not both")
		case len(c.Paths) == 0 && len(c.Command) == 0:
			ps.add("verify.compare", "needs paths or command")
		}
		if len(c.Paths) > MaxComparePaths {
			ps.add("verify.compare.paths", "must list at most %d paths", MaxComparePaths)
		}
		for i, p := range c.Paths {
			f := fmt.Sprintf("verify.compare.paths[%d]", i)
			clean := path.Clean(p)
			switch {
			case p == "" || strings.HasPrefix(p, "/") || clean == ".." || strings.HasPrefix(clean, "../"):
				ps.add(f, "must be a path inside the output folder, such as metrics.json")
			case strings.ContainsRune(p, ','):
				ps.add(f, "must not contain a comma")
			default:
				validateText(f, p, ps)
			}
		}
		if c.Image != "" && len(c.Command) == 0 {
			ps.add("verify.compare.image", "needs verify.compare.command")
		}
		for i, a := range c.Command {
			validateText(fmt.Sprintf("verify.compare.command[%d]", i), a, ps)
		}
	}
}
