package view

import "github.com/libp2p/go-libp2p/core/peer"

// openCounts counts each submitter's open jobs declared one by one, to
// bound them (maxOpenJobsPerSubmitter), and its arrays' open tasks apart
// (maxOpenTasksPerSubmitter). What a submitter holds, open or closed,
// against the view's Bounds is its holder's (holdings). Part of a Market,
// guarded by its mu.
type openCounts struct {
	jobs  map[peer.ID]int
	tasks map[peer.ID]int
}

func newOpenCounts() openCounts {
	return openCounts{jobs: make(map[peer.ID]int), tasks: make(map[peer.ID]int)}
}

// add counts one open job (or task) of a submitter more, and drop one
// fewer.
func (o *openCounts) add(j *OpenJob) {
	if j.Array != "" {
		o.tasks[j.Submitter]++
	} else {
		o.jobs[j.Submitter]++
	}
}

func (o *openCounts) drop(j *OpenJob) {
	m := o.jobs
	if j.Array != "" {
		m = o.tasks
	}
	if m[j.Submitter]--; m[j.Submitter] <= 0 {
		delete(m, j.Submitter)
	}
}

// total is how many jobs and tasks are open.
func (o *openCounts) total() int {
	n := 0
	for _, c := range o.jobs {
		n += c
	}
	for _, c := range o.tasks {
		n += c
	}
	return n
}
