package main

import (
	"time"

	"github.com/e31network/e31/node/api"
	"github.com/spf13/pflag"
)

// retryForUsage is the help of --retry-for, which every command that
// follows jobs (wait, submit --wait, get --wait, logs -f) takes.
const retryForUsage = "while the daemon does not answer (a restart), ask again for up to this long before giving up with exit status 3; 0: give up at once"

// addRetryFor adds --retry-for to a command that follows jobs.
func addRetryFor(f *pflag.FlagSet, d *time.Duration) {
	f.DurationVar(d, "retry-for", api.DefaultReconnectFor, retryForUsage)
}

// reconnect is how a command that follows jobs outlasts a restart of its
// daemon: it asks again every poll for up to d, with a line on stderr when
// the daemon stops answering and one when it is back (none with quiet), so
// that a pause in the output is not a mystery. The jobs go on without the
// daemon's API; only the asking pauses.
func (g *globalOptions) reconnect(d, poll time.Duration, quiet bool) *api.Reconnect {
	r := &api.Reconnect{For: d, Every: poll}
	if quiet || d <= 0 {
		return r
	}
	r.Lost = func(error) {
		writef(g.stderr, "e31: the daemon at %s does not answer (restarting?); asking again for up to %s\n", g.api, d)
	}
	r.Back = func(down time.Duration) {
		writef(g.stderr, "e31: the daemon answers again after %s; going on\n", down.Round(time.Second))
	}
	return r
}
