package submitter

import (
	"slices"
	"testing"
	"time"

	"github.com/e31network/e31/node/api"
	"github.com/e31network/e31/node/wire"
)

// TestReachedSteps checks how the steps a provider sends along with its
// receipts and output request land on the job: only run and output, the
// state moving forward and never back, each step once, at the provider's
// time unless its clock is off.
func TestReachedSteps(t *testing.T) {
	now := time.UnixMilli(1_800_000_000_000).UTC()
	ms := func(d time.Duration) int64 { return now.Add(d).UnixMilli() }
	run := wire.StepAt{Step: api.StepRun, At: ms(-2 * time.Second)}
	output := wire.StepAt{Step: api.StepOutput, At: ms(-time.Second)}
	cases := []struct {
		name      string
		state     api.JobState
		have      []api.Step
		steps     []wire.StepAt
		wantState api.JobState
		want      []api.Step
	}{
		{"run starts", api.JobRenting, nil, []wire.StepAt{run}, api.JobRunning,
			[]api.Step{{Step: api.StepRun, At: now.Add(-2 * time.Second)}}},
		{"run and output at once", api.JobRenting, nil, []wire.StepAt{run, output}, api.JobOutput,
			[]api.Step{{Step: api.StepRun, At: now.Add(-2 * time.Second)}, {Step: api.StepOutput, At: now.Add(-time.Second)}}},
		{"output before run, sorted", api.JobRunning, nil, []wire.StepAt{output, run}, api.JobOutput,
			[]api.Step{{Step: api.StepRun, At: now.Add(-2 * time.Second)}, {Step: api.StepOutput, At: now.Add(-time.Second)}}},
		{"a step already known keeps its time", api.JobRunning, []api.Step{{Step: api.StepRun, At: now.Add(-5 * time.Second)}},
			[]wire.StepAt{run}, api.JobRunning, []api.Step{{Step: api.StepRun, At: now.Add(-5 * time.Second)}}},
		{"never back from released", api.JobReleased, nil, []wire.StepAt{run, output}, api.JobReleased,
			[]api.Step{{Step: api.StepRun, At: now.Add(-2 * time.Second)}, {Step: api.StepOutput, At: now.Add(-time.Second)}}},
		{"a provider cannot claim other steps", api.JobRunning, nil,
			[]wire.StepAt{{Step: api.StepRelease, At: ms(0)}, {Step: api.StepSubmit, At: ms(0)}, {Step: "bogus", At: ms(0)}}, api.JobRunning, nil},
		{"a clock far off is not believed", api.JobRenting, nil, []wire.StepAt{{Step: api.StepRun, At: ms(time.Hour)}}, api.JobRunning,
			[]api.Step{{Step: api.StepRun, At: now}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := Record{State: c.state, Steps: slices.Clone(c.have)}
			r.reached(c.steps, now)
			if r.State != c.wantState {
				t.Errorf("state %s, want %s", r.State, c.wantState)
			}
			if !slices.EqualFunc(r.Steps, c.want, func(a, b api.Step) bool { return a.Step == b.Step && a.At.Equal(b.At) }) {
				t.Errorf("steps %v, want %v", r.Steps, c.want)
			}
		})
	}
}
