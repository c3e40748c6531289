package doctor

import (
	"fmt"
	"io"
	"text/tabwriter"
)

// WriteText writes one line per check, its fix indented below it, and a
// summary line.
func (r Report) WriteText(w io.Writer) error {
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
	_, err := fmt.Fprintf(w, "%d ok, %d warnings, %d failed\n", r.Count(OK), r.Count(Warn), r.Count(Fail))
	return err
}
