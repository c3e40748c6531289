//go:build byzantine

package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/spf13/pflag"
)

// --misbehave raw-content makes a hostile submitter and leaves the
// provider honest unless a provider misbehaviour is asked for too.
func TestMisbehaveRawContent(t *testing.T) {
	for _, tc := range []struct {
		args                    []string
		rawContent, byzProvider bool
		wantErr                 bool
	}{
		{args: nil},
		{args: []string{"--misbehave", "raw-content"}, rawContent: true},
		{args: []string{"--misbehave", "squat,raw-content"}, rawContent: true, byzProvider: true},
		{args: []string{"--misbehave", "raw-content,raw-content"}, wantErr: true},
		{args: []string{"--misbehave", "raw"}, wantErr: true},
	} {
		f := pflag.NewFlagSet("e31d", pflag.ContinueOnError)
		read := misbehaveFlag(f)
		if err := f.Parse(tc.args); err != nil {
			t.Fatal(err)
		}
		m, err := read()
		if (err != nil) != tc.wantErr {
			t.Fatalf("%q: err %v, want error %v", tc.args, err, tc.wantErr)
		}
		if err != nil {
			continue
		}
		if m.rawContent != tc.rawContent || (m.provider != nil) != tc.byzProvider {
			t.Errorf("%q: raw content %v, provider misbehaves %v; want %v, %v", tc.args, m.rawContent, m.provider != nil, tc.rawContent, tc.byzProvider)
		}
	}
}

// wrong-output flips the last byte of the output's first file in sorted
// order, and nothing else; an empty output gets a file x of one byte.
func TestMisbehaveWrongOutput(t *testing.T) {
	dir := t.TempDir()
	files := map[string]string{"b.txt": "bbb", "a/z.txt": "hello", "a/empty": "", "c": "ccc"}
	for name, body := range files {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, name)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	b := &byzantine{modes: []string{misWrongOutput}}
	if !b.Work("l") {
		t.Fatal("wrong-output does not run the job")
	}
	if err := b.Output("l", dir); err != nil {
		t.Fatal(err)
	}
	for name, body := range files {
		got, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		if name == "a/z.txt" {
			if len(got) != 5 || string(got[:4]) != "hell" || got[4] != 'o'^0xff {
				t.Fatalf("%s: %q, want its last byte flipped", name, got)
			}
			continue
		}
		if string(got) != body {
			t.Errorf("%s changed: %q", name, got)
		}
	}

	empty := t.TempDir()
	if err := b.Output("l", empty); err != nil {
		t.Fatal(err)
	}
	if got, err := os.ReadFile(filepath.Join(empty, "x")); err != nil || len(got) != 1 {
		t.Fatalf("empty output: x is %q, %v; want one byte", got, err)
	}

	honest := &byzantine{modes: []string{misSquat}}
	other := t.TempDir()
	if err := honest.Output("l", other); err != nil {
		t.Fatal(err)
	}
	if entries, _ := os.ReadDir(other); len(entries) != 0 {
		t.Fatalf("an output changed without wrong-output: %v", entries)
	}
}

// no-work runs nothing, and the flag takes both new names once each.
func TestMisbehaveNoWork(t *testing.T) {
	f := pflag.NewFlagSet("e31d", pflag.ContinueOnError)
	read := misbehaveFlag(f)
	if err := f.Parse([]string{"--misbehave", "no-work,wrong-output"}); err != nil {
		t.Fatal(err)
	}
	m, err := read()
	if err != nil {
		t.Fatal(err)
	}
	if m.provider == nil || m.provider.Work("l") {
		t.Fatal("no-work runs the job")
	}
	f = pflag.NewFlagSet("e31d", pflag.ContinueOnError)
	read = misbehaveFlag(f)
	if err := f.Parse([]string{"--misbehave", "no-work,no-work"}); err != nil {
		t.Fatal(err)
	}
	if _, err := read(); err == nil {
		t.Fatal("no-work given twice accepted")
	}
}
