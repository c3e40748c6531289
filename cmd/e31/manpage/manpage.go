// Package manpage writes man pages from a cobra command tree; both e31 and
// e31d serve it as their hidden `man` verb, for packagers.
package manpage

import (
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/cobra/doc"
	"github.com/spf13/pflag"
)

// Command writes a man page per command of the tree root: NAME(1),
// NAME-VERB(1), ... It is hidden from the verbs a user sees, and the pages
// leave it out.
func Command(root *cobra.Command) *cobra.Command {
	var dir string
	cmd := &cobra.Command{
		Use:    "man --dir DIR",
		Short:  "Write man pages for every command into DIR",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := os.MkdirAll(dir, 0o755); err != nil {
				return err
			}
			homeDefaults(root)
			// The date comes from SOURCE_DATE_EPOCH when set, so that
			// packaged pages are reproducible.
			if err := doc.GenManTree(root, &doc.GenManHeader{Section: "1", Source: "E31", Manual: "E31 Manual"}, dir); err != nil {
				return fmt.Errorf("man pages: %w", err)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&dir, "dir", "", "directory to write the pages into (created if missing)")
	_ = cmd.MarkFlagRequired("dir")
	return cmd
}

// homeDefaults writes defaults under the home directory of whoever
// generates the pages as ~/..., so that packaged pages say what a reader's
// default is.
func homeDefaults(c *cobra.Command) {
	home, err := os.UserHomeDir()
	if err != nil || home == "/" {
		return
	}
	fix := func(f *pflag.Flag) {
		if rest, ok := strings.CutPrefix(f.DefValue, home+"/"); ok {
			f.DefValue = "~/" + rest
		}
	}
	c.LocalFlags().VisitAll(fix)
	c.PersistentFlags().VisitAll(fix)
	for _, sub := range c.Commands() {
		homeDefaults(sub)
	}
}
