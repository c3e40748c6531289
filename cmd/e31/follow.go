package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/e31network/e31/ledger"
	"github.com/e31network/e31/node/api"
	"github.com/e31network/e31/p2p/peertext"
)

// defaultPoll is how often a job is asked about where the daemon cannot
// answer on its next change (one that predates waiting).
const defaultPoll = 500 * time.Millisecond

// followWait is how long one request waits for a job's next change.
const followWait = 30 * time.Second

type followOptions struct {
	json    bool
	outDir  string
	poll    time.Duration
	timeout time.Duration
	// retryFor is how long a daemon that stopped answering is asked
	// again (--retry-for); 0: not at all.
	retryFor time.Duration
}

// followJob prints one line per step as the job reaches it, then writes the
// output and prints a line saying how the job ended.
func followJob(ctx context.Context, g *globalOptions, id string, o followOptions) error {
	if o.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, o.timeout)
		defer cancel()
	}
	if o.poll <= 0 {
		o.poll = defaultPoll
	}
	cl := g.client()
	// A restart of the daemon pauses the following; the job goes on.
	rc := g.reconnect(o.retryFor, o.poll, false)
	seen := 0
	lastReason := ""
	// Stopping the command stops only the following.
	goesOn := func(state string) error {
		return fmt.Errorf("stopped following job %s (%s; it goes on without this command: e31 status %s follows it, e31 withdraw %s stops it): %w", id, state, id, id, ctx.Err())
	}
	var j api.Job
	err := rc.Do(ctx, func(ctx context.Context) (err error) {
		j, err = cl.Job(ctx, id)
		return err
	})
	if ctx.Err() != nil {
		return goesOn("submitted")
	}
	if err != nil {
		return err
	}
	attempts := max(len(j.Attempts), 1)
	for {
		if !o.json {
			if n := len(j.Attempts); n > attempts {
				// A resumption: its steps are the job's from here on.
				attempts, seen = n, 0
			}
			for ; seen < len(j.Steps); seen++ {
				s := j.Steps[seen]
				line := fmt.Sprintf("%s  %-8s", s.At.Local().Format("15:04:05.000"), s.Step)
				switch s.Step {
				case "submit":
					line += " job " + j.ID
					if n := len(j.Attempts); n > 1 {
						line += fmt.Sprintf(", attempt %d (%s) from %s", n, j.Attempts[n-1].ID, startedFrom(j.Attempts[n-1]))
					}
				case "rent":
					line += fmt.Sprintf(" provider %s, %d GPUs", j.Provider, len(j.GPUs))
				}
				writef(g.stderr, "%s\n", line)
			}
			if j.State == api.JobQueued && j.Reason != lastReason {
				lastReason = j.Reason
				writef(g.stderr, "              waiting: %s\n", j.Reason)
			}
		}
		if j.State.Terminal() {
			break
		}
		// The daemon answers at the job's next change; one that cannot is
		// asked again after the poll interval.
		var next api.Job
		err := rc.Do(ctx, func(ctx context.Context) (err error) {
			next, err = cl.NextJob(ctx, j, followWait, o.poll)
			return err
		})
		if ctx.Err() != nil {
			return goesOn("still " + string(j.State))
		}
		if err != nil {
			return err
		}
		j = next
	}
	outDir := ""
	if j.Output != "" {
		dir := o.outDir
		if dir == "" {
			dir = j.ID + "-out"
		}
		abs, err := filepath.Abs(dir)
		if err != nil {
			return err
		}
		var res api.GetResult
		err = rc.Do(ctx, func(ctx context.Context) (err error) {
			res, err = cl.Get(ctx, j.ID, api.GetRequest{Dir: abs})
			return err
		})
		if err != nil {
			return err
		}
		if !o.json {
			writef(g.stderr, "output %s written to %s\n", res.CID, res.Dir)
			printLeftOut(g.stderr, j.Skipped)
		}
		outDir = res.Dir
	}
	var rres api.Receipts
	err = rc.Do(ctx, func(ctx context.Context) (err error) {
		rres, err = cl.Receipts(ctx, j.ID, false)
		return err
	})
	if err != nil {
		return err
	}
	var rs []ledger.Receipt
	_ = json.Unmarshal(rres.Receipts, &rs)
	var final *ledger.Receipt
	for i := range rs {
		if rs[i].Final {
			final = &rs[i]
		}
	}
	if o.json {
		if err := g.printJSON(followed{Job: j, FinalReceipt: final}); err != nil {
			return err
		}
	} else {
		writef(g.stdout, "job %s %s\n", j.ID, summary(j))
		if final != nil {
			fmt.Fprintf(g.stderr, "final receipt signed by both (e31 receipts --job %s --verify shows it)\n", j.ID)
		}
	}
	if j.Outcome != "completed" {
		exit, why := "", ""
		if j.ExitCode != nil {
			exit = fmt.Sprintf(", exit code %d", *j.ExitCode)
		}
		if j.Reason != "" && !strings.HasPrefix(j.Reason, "exit status ") {
			why = ": " + peertext.Escape(j.Reason)
		}
		if outDir != "" && !o.json {
			printTail(g.stderr, filepath.Join(outDir, "stderr.log"), stderrTailLines)
		}
		return fmt.Errorf("job %s ended %s%s%s", j.ID, j.Outcome, endingDetail(j.Attribution, exit), why)
	}
	return nil
}

// startedFrom says where an attempt's run starts.
func startedFrom(a api.Attempt) string {
	if a.StartedFrom == "" {
		return "the beginning"
	}
	return "checkpoint " + a.StartedFrom
}

// followed is what submit --wait --json prints: the job, and its final
// receipt once both sides signed it.
type followed struct {
	api.Job
	FinalReceipt *ledger.Receipt `json:"final_receipt,omitempty"`
}

// stderrTailLines is how much of a job's stderr.log submit --wait shows
// when the job did not complete: where a traceback's last lines say why.
const stderrTailLines = 10

// printTail prints the last n lines of the file at p, indented under a
// line naming it; nothing when it is empty or cannot be read.
func printTail(w io.Writer, p string, n int) {
	f, err := os.Open(p)
	if err != nil {
		return
	}
	defer f.Close()
	const most = 8 << 10 // bytes read from the end, at most
	if fi, err := f.Stat(); err == nil && fi.Size() > most {
		if _, err := f.Seek(fi.Size()-most, io.SeekStart); err != nil {
			return
		}
	}
	b, err := io.ReadAll(io.LimitReader(f, most))
	if err != nil {
		return
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) == 1 && lines[0] == "" {
		return
	}
	lines = lines[max(0, len(lines)-n):]
	fmt.Fprintf(w, "last lines of %s:\n", p)
	for _, l := range lines {
		fmt.Fprintf(w, "  | %s\n", l)
	}
}

// printLeftOut names what the provider left out of a job's output (links
// out of the tree, FIFOs, sockets, devices), so that a user who finds a
// file missing from the folder learns why where the folder was written.
func printLeftOut(w io.Writer, skipped []string) {
	for _, s := range skipped {
		writef(w, "left out of output: %s\n", s)
	}
}
