//go:build byzantine

package main

import (
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
