package main

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/pflag"
)

// Each kind of config error names the file, the line and column, the key
// as written and the fix.
func TestConfigErrors(t *testing.T) {
	for _, tc := range []struct {
		name, doc string
		want      []string // each must appear in the error
		problems  int
	}{
		{"unknown key", "data = \"/var/lib/e31\"\nreclaim_on_use = true\n",
			[]string{"e31d.toml:2:1: unknown key reclaim_on_use; did you mean reclaim-on-use?"}, 1},
		{"unknown keys", "hourz = \"daily 19:00-07:00\"\nlisten = []\nfrobnicate = 1\n",
			[]string{"e31d.toml:1:1: unknown key hourz; did you mean hours?",
				"e31d.toml:3:1: unknown key frobnicate; the keys are e31d's flags' long names (e31d --help)"}, 2},
		{"unknown table", "mdns = true\n[relay]\ndata = true\n",
			[]string{"e31d.toml:2:2: unknown table [relay]; the config has no tables"}, 1},
		{"unknown key and wrong type", "reclaim-on-use = \"yes\"\nreclaim_idle = \"5m\"\n",
			[]string{"e31d.toml:1:18: reclaim-on-use wants true or false, got a string\nconfig /etc/e31/e31d.toml:2:1: unknown key reclaim_idle; did you mean reclaim-idle?"}, 2},
		{"bool as string", "reclaim-on-use = \"yes\"\n",
			[]string{"e31d.toml:1:18: reclaim-on-use wants true or false, got a string"}, 1},
		{"optional bool", "cpu-jobs = 1\n",
			[]string{"e31d.toml:1:12: cpu-jobs wants true or false, got a whole number"}, 1},
		{"list as string", "listen = \"/ip4/0.0.0.0/tcp/4031\"\n",
			[]string{`e31d.toml:1:10: listen wants a list of strings in quotes, such as ["a", "b"], got a string`}, 1},
		{"list of numbers", "bootstrap = [1]\n",
			[]string{"e31d.toml:1:14: bootstrap wants a list of strings in quotes", "got a list holding a whole number"}, 1},
		{"int as float", "\nshards = 1.5\n",
			[]string{"e31d.toml:2:10: shards wants a whole number, got a number with a fraction"}, 1},
		{"duration as number", "grace = 30\n",
			[]string{`e31d.toml:1:9: grace wants a duration in quotes, such as "30s", got a whole number`}, 1},
		{"string as bool", "nat = false\n",
			[]string{"e31d.toml:1:7: nat wants a string in quotes, got true or false"}, 1},
		{"unquoted string", "hours = 19:00-07:30\n",
			[]string{"e31d.toml:1:14: not TOML: extra characters at the end of a local time; hours wants a string in quotes",
				"1| hours = 19:00-07:30"}, 1},
		{"syntax", "mdns = true\nrelay service = true\n",
			[]string{"e31d.toml:2:7: not TOML: expected '=' after key", "2| relay service = true"}, 1},
		{"unterminated string", "network = \"testnet\n",
			[]string{"e31d.toml:1:19: not TOML: basic strings cannot have new lines"}, 1},
		{"duplicate key", "shards = 1\nshards = 2\n",
			[]string{"e31d.toml:2:1: not TOML: key shards is already defined"}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := decodeConfig("/etc/e31/e31d.toml", []byte(tc.doc))
			var cerr *configError
			if !errors.As(err, &cerr) {
				t.Fatalf("error %v (%T), want a *configError", err, err)
			}
			if len(cerr.Problems) != tc.problems {
				t.Errorf("%d problems, want %d: %v", len(cerr.Problems), tc.problems, err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), "config /etc/e31/"+w) && !strings.Contains(err.Error(), w) {
					t.Errorf("error\n%v\nlacks %q", err, w)
				}
			}
			if !strings.HasPrefix(err.Error(), "config /etc/e31/e31d.toml:") {
				t.Errorf("error %q does not start with the file and line", err)
			}
			if strings.Contains(err.Error(), "fileConfig") || strings.Contains(err.Error(), "strict mode") {
				t.Errorf("error names Go's types: %v", err)
			}
		})
	}
}

// A duration that does not parse is named with its line, through the
// whole of applyFile; a good file applies.
func TestApplyFileErrors(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.toml")
	if err := os.WriteFile(bad, []byte("mdns = true\n  grace = \"30 seconds\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var o options
	err := applyFile(pflag.NewFlagSet("e31d", pflag.ContinueOnError), bad, &o)
	want := "config " + bad + `:2:11: grace = "30 seconds" is not a duration`
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("error %v, want %q", err, want)
	}
	good := filepath.Join(dir, "good.toml")
	if err := os.WriteFile(good, []byte("reclaim-on-use = true\ngrace = \"45s\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	o = options{}
	if err := applyFile(pflag.NewFlagSet("e31d", pflag.ContinueOnError), good, &o); err != nil {
		t.Fatal(err)
	}
	if !o.file.ReclaimOnUse || o.grace.String() != "45s" {
		t.Fatalf("applied %+v, grace %s", o.file.ReclaimOnUse, o.grace)
	}
}

// Every key of the shipped config is known, with the type it is given.
func TestShippedConfigDecodes(t *testing.T) {
	b, err := os.ReadFile("dist/e31d.toml")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := decodeConfig("dist/e31d.toml", b); err != nil {
		t.Fatal(err)
	}
}

// The decoder fails only with a *configError that says something, and
// never panics.
func FuzzDecodeConfig(f *testing.F) {
	for _, s := range []string{
		"", "data = \"/x\"\n", "reclaim_on_use = true\n", "reclaim-on-use = \"yes\"\n", "[relay]\nx = 1\n",
		"listen = [1, \"a\"]\n", "hours = 19:00-07:30\n", "a.b.c = 1\n", "shards = 1\nshards = 2\n",
		"grace = 1979-05-27T07:32:00Z\n", "listen = [[\"a\"]]\n", "cpu-jobs = {a = 1}\n", "[[listen]]\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		_, err := decodeConfig("f.toml", data)
		if err == nil {
			return
		}
		var cerr *configError
		if !errors.As(err, &cerr) || len(cerr.Problems) == 0 {
			t.Fatalf("error %v (%T)", err, err)
		}
		for _, p := range cerr.Problems {
			if p.Msg == "" {
				t.Fatalf("a problem without a message: %+v", p)
			}
		}
	})
}
