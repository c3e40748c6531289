package bench

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
)

// Figure is one row of the table: a measured value, the in-run baseline it
// is compared with (if any), their ratio, and the goal it is held against.
type Figure struct {
	// Group is the part of the benchmark that measured it.
	Group string `json:"group"`
	Name  string `json:"name"`
	// Value is the figure in Unit; Measured is how it is shown.
	Value    float64 `json:"value"`
	Unit     string  `json:"unit"`
	Measured string  `json:"measured"`
	// Baseline is what the figure is compared with in the same run, shown;
	// empty when there is none.
	Baseline string `json:"baseline,omitempty"`
	// Ratio is Value over the baseline, or the ratio the goal is stated
	// in; nil when there is none.
	Ratio *float64 `json:"ratio,omitempty"`
	// Goal is the goal, shown; OK is nil when there is no goal.
	Goal string `json:"goal,omitempty"`
	OK   *bool  `json:"ok,omitempty"`
}

// Verdict is how a figure's goal reads in every printout: "ok" or
// "MISSED".
func Verdict(ok bool) string {
	if ok {
		return "ok"
	}
	return "MISSED"
}

// verdict is what the table shows for f.OK.
func (f Figure) verdict() string {
	if f.OK == nil {
		return ""
	}
	return Verdict(*f.OK)
}

func (f Figure) ratio() string {
	if f.Ratio == nil {
		return ""
	}
	return fmt.Sprintf("%.2fx", *f.Ratio)
}

// Table is a run's figures with what the reader needs to judge them.
type Table struct {
	// Machine says where and under what load it ran.
	Machine string   `json:"machine"`
	Figures []Figure `json:"figures"`
	// Notes are lines printed under the table (what was skipped, where the
	// profiles are).
	Notes []string `json:"notes,omitempty"`
}

// Missed counts the figures that missed their goal.
func (t Table) Missed() int {
	n := 0
	for _, f := range t.Figures {
		if f.OK != nil && !*f.OK {
			n++
		}
	}
	return n
}

// WriteText prints the table aligned for a terminal.
func (t Table) WriteText(w io.Writer) error {
	fmt.Fprintf(w, "%s\n\n", t.Machine)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "figure\tmeasured\tbaseline (in-run)\tratio\tgoal\t")
	group := ""
	for _, f := range t.Figures {
		if f.Group != group && group != "" {
			fmt.Fprintln(tw, "\t\t\t\t\t")
		}
		group = f.Group
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", f.Name, f.Measured, f.Baseline, f.ratio(), f.Goal, f.verdict())
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, n := range t.Notes {
		fmt.Fprintf(w, "\n%s", n)
	}
	if len(t.Notes) > 0 {
		fmt.Fprintln(w)
	}
	return nil
}

// WriteTextSummary is WriteText followed, when figures missed their goal,
// by a line that counts them.
func (t Table) WriteTextSummary(w io.Writer) error {
	if err := t.WriteText(w); err != nil {
		return err
	}
	if n := t.Missed(); n > 0 {
		_, err := fmt.Fprintf(w, "\n%d of the figures missed their goal\n", n)
		return err
	}
	return nil
}

// WriteMarkdown prints the table as markdown, for docs/figures.md.
func (t Table) WriteMarkdown(w io.Writer) error {
	esc := func(s string) string { return strings.ReplaceAll(s, "|", `\|`) }
	fmt.Fprintf(w, "Measured with `go run ./testnet bench` (%s).\n\n", esc(t.Machine))
	fmt.Fprintln(w, "| figure | measured | baseline (same run) | ratio | goal | |")
	fmt.Fprintln(w, "| --- | --- | --- | --- | --- | --- |")
	for _, f := range t.Figures {
		fmt.Fprintf(w, "| %s | %s | %s | %s | %s | %s |\n", esc(f.Name), esc(f.Measured), esc(f.Baseline), f.ratio(), esc(f.Goal), f.verdict())
	}
	_, err := fmt.Fprintln(w)
	return err
}
