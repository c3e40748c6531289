// Command e31 is the E31 client: it talks to a local e31d over its API to
// list peers and providers, submit jobs, follow them, fetch their output and
// read the receipts ledger. One verb, verify, needs no daemon: it checks a
// receipts export file anywhere.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"syscall"
	"unicode/utf8"

	"github.com/e31network/e31/cmd/e31/manpage"
	"github.com/e31network/e31/node/api"
	"github.com/e31network/e31/p2p/peertext"
	"github.com/spf13/cobra"
)

// globalOptions are the flags every verb shares.
type globalOptions struct {
	api string
	// tokenFile is --api-token-file: where the token of a TCP API is.
	tokenFile string
	stdout    io.Writer
	stderr    io.Writer

	tokenOnce sync.Once
	token     string // read once, by apiToken
}

// client talks to the daemon, with its token where the API is TCP.
func (g *globalOptions) client() *api.Client {
	if api.IsUnix(g.api) {
		return api.NewClient(g.api)
	}
	return api.NewClient(g.api, api.WithToken(g.apiToken()))
}

// apiToken is the token of a TCP API: the file --api-token-file (or
// $E31_API_TOKEN_FILE) names, else $E31_API_TOKEN, else the one in the
// data dir e31 knows ($E31_DATA, else ~/.e31), the daemon's own when both
// run as one user. A token that cannot be found is not sent, and the
// daemon says what it wants; one named and unreadable is said at once.
func (g *globalOptions) apiToken() string {
	g.tokenOnce.Do(func() {
		if g.tokenFile != "" {
			tok, err := api.ReadToken(g.tokenFile)
			if err != nil {
				fmt.Fprintf(g.stderr, "e31: --api-token-file: %v\n", err)
			}
			g.token = tok
			return
		}
		if tok := strings.TrimSpace(os.Getenv("E31_API_TOKEN")); tok != "" {
			g.token = tok
			return
		}
		g.token, _ = api.ReadToken(filepath.Join(defaultDataDir(), api.TokenFile))
	})
	return g.token
}

// printJSON writes v indented, for --json, with every rune a terminal
// would obey escaped (escapeJSON).
func (g *globalOptions) printJSON(v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	_, err = g.stdout.Write(escapeJSON(append(b, '\n')))
	return err
}

// escapeJSON writes as \u escapes, in JSON that encoding/json made, the
// runes a terminal obeys that it leaves as they are: DEL, the C1 controls
// (U+009B is CSI to a terminal that reads them) and the bidi controls
// (peertext.Unsafe); encoding/json escapes the C0 controls itself. Outside
// its strings JSON is ASCII, so each such rune is inside a string, where
// the escape reads back as the same rune: a script reads what the daemon
// said, and a person who prints it to a terminal sees it safely.
func escapeJSON(b []byte) []byte {
	if !bytes.ContainsFunc(b, peertext.Unsafe) {
		return b
	}
	out := make([]byte, 0, len(b)+16)
	for len(b) > 0 {
		r, n := utf8.DecodeRune(b)
		if r >= 0x7f && peertext.Unsafe(r) { // encoding/json escaped those below DEL
			out = fmt.Appendf(out, `\u%04x`, r)
		} else {
			out = append(out, b[:n]...)
		}
		b = b[n:]
	}
	return out
}

// writef is fmt.Fprintf for text that carries what the daemon answered,
// much of which a peer wrote (a GPU's model, a job's name, a reason): each
// argument of a string kind is written escaped (peertext.Escape), so that
// a control or bidi character shows as \x1b or \u202e rather than reaching
// the reader's terminal, which would obey it. A Stringer of a string kind
// (a peer.ID) is escaped as its String, an error as its text. The format
// is the command's own text, with the tabs and newlines of its layout, and
// is written as it is. The commands that show what peers wrote (nodes,
// peers, status, list, wait, logs, get, receipts, usage, verify) print
// through writef, so that a field added to an answer is escaped when shown
// without anyone remembering to.
func writef(w io.Writer, format string, args ...any) {
	for i, a := range args {
		if err, ok := a.(error); ok {
			args[i] = peertext.Escape(err.Error())
			continue
		}
		if s, ok := a.(fmt.Stringer); ok {
			if v := reflect.ValueOf(a); v.Kind() == reflect.String {
				args[i] = peertext.Escape(s.String())
			}
			continue
		}
		if v := reflect.ValueOf(a); v.Kind() == reflect.String {
			args[i] = peertext.Escape(v.String())
		}
	}
	fmt.Fprintf(w, format, args...)
}

func defaultAPI() string {
	if a := os.Getenv("E31_API"); a != "" {
		return a
	}
	return filepath.Join(defaultDataDir(), "e31.sock")
}

// defaultDataDir is the daemon's data dir as e31 knows it: $E31_DATA, else
// ~/.e31.
func defaultDataDir() string {
	if data := os.Getenv("E31_DATA"); data != "" {
		return data
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return ".e31"
	}
	return filepath.Join(home, ".e31")
}

func newRootCommand(g *globalOptions) *cobra.Command {
	root := &cobra.Command{
		Use:   "e31",
		Short: "Rent GPU compute on the E31 network",
		Long: `e31 talks to the local e31d daemon. Submit a batch job, go home, and fetch
its output in the morning; both sides keep signed receipts of the time held.

The daemon is found at --api, else $E31_API, else $E31_DATA/e31.sock, else
~/.e31/e31.sock. An API on a loopback host:port wants the daemon's token,
which e31 reads from --api-token-file, else $E31_API_TOKEN, else
$E31_DATA/api-token (~/.e31/api-token); the unix socket needs none.`,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.PersistentFlags().StringVar(&g.api, "api", defaultAPI(), "daemon API: unix socket path or loopback host:port (env E31_API)")
	root.PersistentFlags().StringVar(&g.tokenFile, "api-token-file", os.Getenv("E31_API_TOKEN_FILE"), "file holding the token of an API on host:port, the daemon's DATA/api-token (env E31_API_TOKEN_FILE; default $E31_API_TOKEN, else $E31_DATA/api-token)")
	root.AddCommand(
		newIDCommand(g),
		newDrainCommand(g),
		newUndrainCommand(g),
		newPeersCommand(g),
		newNodesCommand(g),
		newMarketCommand(g),
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
		newLeasesCommand(g),
		newVerifyCommand(g),
		newImageCommand(g),
		newDoctorCommand(g),
		newUICommand(g),
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
		// An error may quote what the daemon said, and through it a
		// peer: each line is written escaped, the lines kept apart.
		for i, line := range strings.Split(err.Error(), "\n") {
			if i == 0 {
				line = "e31: " + line
			}
			fmt.Fprintln(os.Stderr, peertext.Escape(line))
		}
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
