package bench

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"

	"github.com/e31network/e31/testnet/cluster"
)

// ErrNeedsRoot is returned when a benchmark runs sandboxes and the process
// cannot.
var ErrNeedsRoot = errors.New("the daemon figures run jobs in runc sandboxes: run as root with runc installed (apt-get install -y runc), or select only the micro figures (--only micro)")

// Env is what a benchmark on real daemons gets from its caller.
type Env struct {
	// Dir holds the networks' data dirs and logs.
	Dir string
	Bin cluster.Binaries
	// Log receives progress lines; nil discards them.
	Log func(format string, args ...any)
}

// Logf writes a progress line to e.Log, if there is one.
func (e Env) Logf(format string, args ...any) {
	if e.Log != nil {
		e.Log(format, args...)
	}
}

// LoadAvg is the 1, 5 and 15 minute load averages, or "?".
func LoadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}

// BuildEnv builds e31d and e31 into dir/bin and returns the Env of a run
// in dir, logging to log (nil: nowhere).
func BuildEnv(ctx context.Context, dir string, log func(format string, args ...any)) (Env, error) {
	e := Env{Dir: dir, Log: log}
	e.Logf("building e31d and e31 (load %s)", LoadAvg())
	bin, err := cluster.Build(ctx, filepath.Join(dir, "bin"))
	if err != nil {
		return e, err
	}
	e.Bin = bin
	return e, nil
}

// BuildAndMeasure builds e31d and e31 into dir/bin and runs measure on
// them with o, in dir, logging to log (nil: nowhere).
func BuildAndMeasure[O, R any](ctx context.Context, dir string, log func(format string, args ...any), o O,
	measure func(context.Context, Env, O) (R, error)) (R, error) {
	e, err := BuildEnv(ctx, dir, log)
	if err != nil {
		var zero R
		return zero, err
	}
	return measure(ctx, e, o)
}
