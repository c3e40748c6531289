// Command e31 is the E31 client: it talks to a local e31d over its API to
// list peers and providers, submit jobs, follow them, fetch their output and
// read the receipts ledger. One verb, verify, needs no daemon: it checks a
// receipts export file anywhere.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"github.com/e31network/e31/cmd/e31/manpage"
	"github.com/e31network/e31/node/api"
	"github.com/spf13/cobra"
)

// globalOptions are the flags every verb shares.
type globalOptions struct {
	api    string
	stdout io.Writer
	stderr io.Writer
}

func (g *globalOptions) client() *api.Client { return api.NewClient(g.api) }

// printJSON writes v indented, for --json.
func (g *globalOptions) printJSON(v any) error {
	enc := json.NewEncoder(g.stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

func defaultAPI() string {
	if a := os.Getenv("E31_API"); a != "" {
		return a
	}
	data := os.Getenv("E31_DATA")
	if data == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			return ".e31/e31.sock"
		}
		data = filepath.Join(home, ".e31")
	}
	return filepath.Join(data, "e31.sock")
}

func newRootCommand(g *globalOptions) *cobra.Command {
	root := &cobra.Command{
		Use:   "e31",
		Short: "Rent GPU compute on the E31 network",
		Long: `e31 talks to the local e31d daemon. Submit a batch job, go home, and fetch
its output in the morning; both sides keep signed receipts of the time held.

The daemon is found at --api, else $E31_API, else $E31_DATA/e31.sock, else
~/.e31/e31.sock.`,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.PersistentFlags().StringVar(&g.api, "api", defaultAPI(), "daemon API: unix socket path or loopback host:port (env E31_API)")
	root.AddCommand(
		newIDCommand(g),
		newDrainCommand(g),
		newUndrainCommand(g),
		newPeersCommand(g),
		newNodesCommand(g),
		newSubmitCommand(g),
		newStatusCommand(g),
		newListCommand(g),
		newWithdrawCommand(g),
		newWaitCommand(g),
		newGetCommand(g),
		newLogsCommand(g),
		newResumeCommand(g),
		newReceiptsCommand(g),
		newUsageCommand(g),
		newVerifyCommand(g),
		newImageCommand(g),
		newDoctorCommand(g),
	)
	root.AddCommand(manpage.Command(root))
	return root
}

func main() {
	g := &globalOptions{stdout: os.Stdout, stderr: os.Stderr}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	root := newRootCommand(g)
	if err := root.ExecuteContext(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "e31:", err)
		if errors.Is(err, api.ErrNoDaemon) {
			os.Exit(3)
		}
		var coded exitCoder
		if errors.As(err, &coded) {
			os.Exit(coded.ExitCode())
		}
		os.Exit(1)
	}
}
