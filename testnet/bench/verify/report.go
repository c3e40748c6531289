package verify

import (
	"fmt"
	"io"
	"text/tabwriter"
)

// Cost is one array of the cost part: how it was checked, how long it
// took and what it held.
type Cost struct {
	// Verify names the check: "none", "spot 0.05", "replicas 2".
	Verify string `json:"verify"`
	// NotMeasured, when set, says why the array did not run.
	NotMeasured string `json:"not_measured,omitempty"`
	Tasks       int    `json:"tasks"`
	Completed   int    `json:"completed"`
	// WallS is the array's submit to its release, in seconds.
	WallS float64 `json:"wall_s"`
	// GPUHours is what the array's leases held, VerificationGPUHours the
	// part of it the checks held.
	GPUHours             float64 `json:"gpu_hours"`
	VerificationGPUHours float64 `json:"verification_gpu_hours"`
	// Checks is the spot checks drawn.
	Checks int `json:"checks,omitempty"`
}

// Catch is one array of the catch part, at one spot rate.
type Catch struct {
	Spot  float64 `json:"spot"`
	Tasks int     `json:"tasks"`
	// LiarTasks is k, the tasks the liar returned; LiarChecks the checks
	// drawn on them, and Checks those drawn on every task.
	LiarTasks  int `json:"liar_tasks"`
	LiarChecks int `json:"liar_checks"`
	Checks     int `json:"checks"`
	// AsChecker counts the checks of other providers' tasks the liar ran.
	AsChecker int `json:"as_checker"`
	// Caught says the array's checks caught the liar; Rerun counts the
	// tasks run again because of it, and Completed the tasks that
	// completed in the end.
	Caught    bool    `json:"caught"`
	Rerun     int     `json:"rerun"`
	Completed int     `json:"completed"`
	WallS     float64 `json:"wall_s"`
	// ModelChecks and ModelPCaught are the model's, for the JSON
	// report: ExpectedChecks and PCaught.
	ModelChecks  float64 `json:"model_checks"`
	ModelPCaught float64 `json:"model_p_caught"`
}

// ExpectedChecks is the model's mean checks on the liar's tasks.
func (c Catch) ExpectedChecks() float64 { return ExpectedChecks(c.Spot, c.LiarTasks) }

// PCaught is the model's chance that a check of its own tasks caught it.
func (c Catch) PCaught() float64 { return PCaught(c.Spot, c.LiarTasks) }

// Report is a run's figures with the sizes and the machine they came from.
type Report struct {
	Machine string `json:"machine"`
	Network string `json:"network"`
	// TaskRunS is how long each task sleeps, in seconds.
	TaskRunS   float64 `json:"task_run_s"`
	Cost       []Cost  `json:"cost"`
	Catch      []Catch `json:"catch"`
	Model      []Draws `json:"model"`
	Seed       uint64  `json:"seed"`
	CatchError string  `json:"catch_error,omitempty"`
}

func ratio(v, base float64) string {
	if base <= 0 {
		return "-"
	}
	return fmt.Sprintf("%.2fx", v/base)
}

// WriteText prints the three parts as tables, under the sizes and the
// machine.
func (r Report) WriteText(w io.Writer) error {
	fmt.Fprintf(w, "%s\n%s\n\n", r.Machine, r.Network)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "cost, %gs tasks\ttasks\tcompleted\twall\tvs none\tGPU-hours\tvs none\tof which checks\tchecks\t\n", r.TaskRunS)
	var base Cost
	for _, c := range r.Cost {
		if c.Verify == "none" && c.NotMeasured == "" {
			base = c
		}
	}
	for _, c := range r.Cost {
		if c.NotMeasured != "" {
			fmt.Fprintf(tw, "%s\t%d\t-\t-\t-\t-\t-\t-\t-\t\n", c.Verify, c.Tasks)
			continue
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%.1fs\t%s\t%.4f\t%s\t%.4f\t%d\t\n", c.Verify, c.Tasks, c.Completed, c.WallS,
			ratio(c.WallS, base.WallS), c.GPUHours, ratio(c.GPUHours, base.GPUHours), c.VerificationGPUHours, c.Checks)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, c := range r.Cost {
		if c.NotMeasured != "" {
			fmt.Fprintf(w, "%s: not measured: %s\n", c.Verify, c.NotMeasured)
		}
	}
	fmt.Fprintln(w)
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "catch: spot\ttasks\tliar's k\tchecks on them\texpected s·k\tcaught\tP(caught)=1-(1-s)^k\tliar as checker\trerun\tcompleted\twall\t")
	for _, c := range r.Catch {
		fmt.Fprintf(tw, "%g\t%d\t%d\t%d\t%.1f\t%s\t%.4f\t%d\t%d\t%d\t%.1fs\t\n", c.Spot, c.Tasks, c.LiarTasks, c.LiarChecks,
			c.ExpectedChecks(), yesNo(c.Caught), c.PCaught(), c.AsChecker, c.Rerun, c.Completed, c.WallS)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if r.CatchError != "" {
		fmt.Fprintf(w, "catch part stopped: %s\n", r.CatchError)
	}
	fmt.Fprintln(w)
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "model: spot\tk\ttrials (seed %d)\tcaught in\t1-(1-s)^k\t\n", r.Seed)
	for _, d := range r.Model {
		fmt.Fprintf(tw, "%g\t%d\t%d\t%.4f\t%.4f\t\n", d.Spot, d.K, d.Trials, d.Share(), PCaught(d.Spot, d.K))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	_, err := fmt.Fprintln(w, "\nchecks on the liar's tasks stop once it is caught: its tasks not yet drawn run again instead.")
	return err
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}
