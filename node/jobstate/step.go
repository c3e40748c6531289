package jobstate

// Step names one of the five steps of a job.
type Step string

// The five steps, in their order.
const (
	StepSubmit  Step = "submit"
	StepRent    Step = "rent"
	StepRun     Step = "run"
	StepOutput  Step = "output"
	StepRelease Step = "release"
)

// Steps lists the five steps in their order.
var Steps = [...]Step{StepSubmit, StepRent, StepRun, StepOutput, StepRelease}

// Order is the step's place among the five, or -1 for an unknown name.
func (s Step) Order() int {
	for i, n := range Steps {
		if n == s {
			return i
		}
	}
	return -1
}
