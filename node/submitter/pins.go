package submitter

import "fmt"

// Pin reasons of what a submitter keeps for a job.
func pinInput(job string) string  { return "input of job " + job }
func pinOutput(job string) string { return "output of job " + job }
func pinImage(job string) string  { return "image of job " + job }
func pinCheckpoint(job string, n int) string {
	return fmt.Sprintf("checkpoint %d of job %s", n, job)
}

// pinImporting holds an input between its import and the job's own pin.
const pinImporting = "input of a submitted job"
