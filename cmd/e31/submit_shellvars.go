package main

import (
	"fmt"
	"path"
	"regexp"
	"slices"
	"strings"

	"github.com/e31network/e31/market"
)

// shellVar matches a variable as a shell would expand it: $NAME or
// ${NAME}.
var shellVar = regexp.MustCompile(`\$(\{[A-Za-z_][A-Za-z0-9_]*\}|[A-Za-z_][A-Za-z0-9_]*)`)

// expandsItself are programs that are a shell, and so expand $NAME in
// the script they are given, or that read $ in their own language (awk's
// $NF, perl's $x): their arguments are left alone.
var expandsItself = []string{"sh", "bash", "dash", "zsh", "ksh", "mksh", "ash", "fish", "busybox",
	"awk", "gawk", "mawk", "nawk", "perl", "sed", "jq", "make"}

// shellVarNotes finds the command's arguments that name a variable as a
// shell would ($E31_TASK_VALUE, ${HOME}): a job's command runs with no
// shell, so they reach the program as written, which is rarely meant (a
// sweep whose every task gets the text "$E31_TASK_VALUE" fails, and is
// paid for). Each finding is a line for the user naming the argument and
// the command through sh -c that would expand it.
func shellVarNotes(d market.Declaration) []string {
	cmd := d.Work.Command
	if len(cmd) == 0 || slices.Contains(expandsItself, path.Base(cmd[0])) {
		return nil
	}
	var notes []string
	for i, arg := range cmd {
		vars := shellVar.FindAllString(arg, -1)
		if len(vars) == 0 {
			continue
		}
		notes = append(notes, fmt.Sprintf("argument %d of the command, %q, names %s, but the command runs with no shell, so the program gets it as written; to expand it, run the command through a shell: sh -c %s",
			i, arg, strings.Join(vars, " and "), shellQuote(shellScript(cmd))))
	}
	return notes
}

// shellScript is the command as one line for sh -c that runs it with its
// variables expanded: an argument naming one double-quoted, so that it
// stays one argument, and any other quoted as it must be.
func shellScript(cmd []string) string {
	words := make([]string, len(cmd))
	for i, a := range cmd {
		switch {
		case shellVar.MatchString(a):
			words[i] = `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`, "`", "\\`").Replace(a) + `"`
		default:
			words[i] = shellQuote(a)
		}
	}
	return strings.Join(words, " ")
}

// shellQuote quotes s for a POSIX shell, when it must be.
func shellQuote(s string) string {
	if s != "" && strings.IndexFunc(s, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_./=:,+@%", r))
	}) < 0 {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
