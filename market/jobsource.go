package market

import (
	"path"
	"strings"
)

// JobSourcePrefix starts a data source that names an earlier job's
// output: job:JOB/out[/PATH], JOB a job of the submitting node. The
// submitter resolves it at submit to the output's CID/PATH, so that no
// peer ever sees the form.
const JobSourcePrefix = "job:"

// SplitJobSource splits job:JOB/PATH into the job and the clean path
// inside its output ("out", "out/model.pt"); ok is false for any other
// source, and for one without a path or whose path climbs out.
func SplitJobSource(s string) (job, sub string, ok bool) {
	rest, found := strings.CutPrefix(s, JobSourcePrefix)
	if !found {
		return "", "", false
	}
	job, p, found := strings.Cut(rest, "/")
	if !found || job == "" {
		return "", "", false
	}
	sub = path.Clean("/" + p)[1:]
	if sub == "" {
		return "", "", false
	}
	return job, sub, true
}
