package api

import "github.com/e31network/e31/node/jobstate"

// The API shows a job's state and steps under the domain's names
// (node/jobstate); these aliases keep the API's own names for them.

// StepName names one of the five steps of a job.
type StepName = jobstate.Step

// The five steps, in their order.
const (
	StepSubmit  = jobstate.StepSubmit
	StepRent    = jobstate.StepRent
	StepRun     = jobstate.StepRun
	StepOutput  = jobstate.StepOutput
	StepRelease = jobstate.StepRelease
)

// Steps lists the five steps in their order.
var Steps = jobstate.Steps

// JobState is where a job stands, as its submitter sees it.
type JobState = jobstate.State

// Job states.
const (
	JobQueued    = jobstate.Queued
	JobRenting   = jobstate.Renting
	JobRunning   = jobstate.Running
	JobOutput    = jobstate.Output
	JobReleased  = jobstate.Released
	JobRejected  = jobstate.Rejected
	JobWithdrawn = jobstate.Withdrawn
)

// JobStates lists every job state, for metrics and tests.
var JobStates = jobstate.States
