package main

import (
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/e31network/e31/market"
)

func TestShellVarNotes(t *testing.T) {
	for _, tc := range []struct {
		cmd  []string
		want []string // one substring per note; none: no note
	}{
		{cmd: []string{"python3", "sim.py", "--lr", "$E31_TASK_VALUE"}, want: []string{
			`argument 3 of the command, "$E31_TASK_VALUE", names $E31_TASK_VALUE, but the command runs with no shell` +
				`, so the program gets it as written; to expand it, run the command through a shell: sh -c 'python3 sim.py --lr "$E31_TASK_VALUE"'`}},
		{cmd: []string{"sim", "--out=/out/${E31_TASK_INDEX}.csv", "--seed", "$SEED$X", "it's"}, want: []string{
			`argument 1 of the command, "--out=/out/${E31_TASK_INDEX}.csv", names ${E31_TASK_INDEX}`,
			`names $SEED and $X, but the command runs with no shell, so the program gets it as written; to expand it, run the command through a shell: sh -c 'sim "--out=/out/${E31_TASK_INDEX}.csv" --seed "$SEED$X" '\''it'\''\'\'''\''s'\'''`}},
		{cmd: []string{"sh", "-c", "sim $E31_TASK_VALUE"}},
		{cmd: []string{"/bin/bash", "-c", "sim ${X}"}},
		{cmd: []string{"awk", "{print $NF}", "f"}},
		{cmd: []string{"sim", "costs $5", "50%"}},
		{cmd: nil},
	} {
		var d market.Declaration
		d.Work.Command = tc.cmd
		got := shellVarNotes(d)
		if len(got) != len(tc.want) {
			t.Errorf("%q: %d notes %q, want %d", tc.cmd, len(got), got, len(tc.want))
			continue
		}
		for i, w := range tc.want {
			if !strings.Contains(got[i], w) {
				t.Errorf("%q: note %d is\n%s\nwant it to hold\n%s", tc.cmd, i, got[i], w)
			}
		}
	}
}

// The suggested script, run by sh -c, gives the program each argument as
// one word, its variables expanded.
func TestShellScriptRuns(t *testing.T) {
	cmd := []string{"printf", `%s|`, "--out=/out/${E31_TASK_INDEX}.csv", "it's", "a b", "$V", `q"$V"\`}
	script := shellScript(cmd)
	c := exec.Command("sh", "-c", script)
	c.Env = append(os.Environ(), "E31_TASK_INDEX=7", "V=x y")
	out, err := c.Output()
	if want := `--out=/out/7.csv|it's|a b|x y|q"x y"\|`; err != nil || string(out) != want {
		t.Fatalf("sh -c %s: %q, %v; want %q", script, out, err, want)
	}
}
