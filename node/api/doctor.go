package api

import (
	"fmt"
	"io"
	"text/tabwriter"
)

// DoctorStatus is a machine check's verdict.
type DoctorStatus string

// The verdicts, from best to worst.
const (
	DoctorOK   DoctorStatus = "ok"
	DoctorWarn DoctorStatus = "warn"
	DoctorFail DoctorStatus = "fail"
)

// DoctorCheck is one check of what e31d needs on its machine (e31d doctor,
// GET /v1/doctor).
type DoctorCheck struct {
	// Name is short and stable, for scripts reading --json.
	Name   string       `json:"name"`
	Status DoctorStatus `json:"status"`
	// Detail says what was found.
	Detail string `json:"detail"`
	// Fix says what to do about a warning or a failure.
	Fix string `json:"fix,omitempty"`
}

// DoctorReport is every check's result, in the order they ran.
type DoctorReport struct {
	Checks []DoctorCheck `json:"checks"`
}

// Count is how many checks ended with status s.
func (r DoctorReport) Count(s DoctorStatus) int {
	n := 0
	for _, c := range r.Checks {
		if c.Status == s {
			n++
		}
	}
	return n
}

// WriteText writes one line per check, its fix indented below it, and a
// summary line.
func (r DoctorReport) WriteText(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	for _, c := range r.Checks {
		fmt.Fprintf(tw, "%s\t%s\t%s\n", c.Status, c.Name, c.Detail)
		if c.Fix != "" {
			fmt.Fprintf(tw, "\t\tfix: %s\n", c.Fix)
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	_, err := fmt.Fprintf(w, "%d ok, %d warnings, %d failed\n", r.Count(DoctorOK), r.Count(DoctorWarn), r.Count(DoctorFail))
	return err
}
