//go:build byzantine

package main

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"

	"github.com/spf13/pflag"
)

// Misbehaviours a test build of the daemon can be asked for. They exist to
// test the network's defences (testnet/e2e, TestByzantine…); a default
// build has neither the flag nor the code.
const (
	misSquat           = "squat"            // advertise GPUs, never propose
	misNoRun           = "no-run"           // sign leases, never start the run
	misSilent          = "silent"           // after the first lease, send nothing at all
	misWithholdReceipt = "withhold-receipt" // never offer a receipt to countersign
	misFakeModel       = "fake-model"       // advertise a GPU model the machine lacks
	misWrongOutput     = "wrong-output"     // run the job, then change one byte of its output
	misNoWork          = "no-work"          // return an empty output at once, never running the job
	// misRawContent plays a hostile submitter: POST /v1/debug/car stores
	// arbitrary DAGs, and jobs may name them unchecked
	// (node.Config.RawContent).
	misRawContent = "raw-content"
)

// fakeModel is the model a fake-model provider claims for every device.
const fakeModel = "B300"

func misbehaveFlag(f *pflag.FlagSet) func() (misbehaviour, error) {
	var names []string
	f.StringSliceVar(&names, "misbehave", nil, "test build only: break the protocol on purpose, a comma list of "+
		strings.Join([]string{misSquat, misNoRun, misSilent, misWithholdReceipt, misFakeModel, misWrongOutput, misNoWork, misRawContent}, ", ")+
		" ("+misFakeModel+" claims "+fakeModel+" for every GPU; "+misWrongOutput+" flips the last byte of the output's first file; "+
		misNoWork+" completes every job at once with an empty output; "+misRawContent+
		" serves POST /v1/debug/car, which stores a CAR's blocks unchecked, and submits jobs naming them)")
	return func() (misbehaviour, error) {
		var m misbehaviour
		b := &byzantine{}
		for _, n := range names {
			switch n {
			case misSquat, misNoRun, misSilent, misWithholdReceipt, misFakeModel, misWrongOutput, misNoWork:
				if slices.Contains(b.modes, n) {
					return m, fmt.Errorf("--misbehave: %s given twice", n)
				}
				b.modes = append(b.modes, n)
			case misRawContent:
				if m.rawContent {
					return m, fmt.Errorf("--misbehave: %s given twice", n)
				}
				m.rawContent = true
			default:
				return m, fmt.Errorf("--misbehave: unknown misbehaviour %q", n)
			}
		}
		if len(b.modes) > 0 {
			m.provider = b
		}
		return m, nil
	}
}

// byzantine is a provider.Misbehaviour made of the modes asked for.
type byzantine struct {
	modes []string // immutable after the flag is read
	// leased is set once a lease is signed: a silent provider falls
	// silent from then on.
	leased atomic.Bool
}

func (b *byzantine) has(m string) bool { return slices.Contains(b.modes, m) }

func (b *byzantine) Propose(string) bool { return !b.has(misSquat) }

func (b *byzantine) Announce(string) bool {
	b.leased.Store(true)
	return !b.has(misSilent)
}

func (b *byzantine) Run(string) bool {
	return !b.has(misNoRun) && !b.has(misSilent)
}

func (b *byzantine) Receipts() bool { return !b.has(misWithholdReceipt) }

func (b *byzantine) Silent() bool { return b.has(misSilent) && b.leased.Load() }

func (b *byzantine) Model(real string) string {
	if b.has(misFakeModel) {
		return fakeModel
	}
	return real
}

func (b *byzantine) Work(string) bool { return !b.has(misNoWork) }

func (b *byzantine) Output(_, dir string) error {
	if !b.has(misWrongOutput) {
		return nil
	}
	return flipOutput(dir)
}

// flipOutput changes one byte of the output folder dir: the last byte of
// its first regular file in sorted order (WalkDir's lexical order, folders
// entered as they come), or, in an output with no such file, a file x of
// one byte.
func flipOutput(dir string) error {
	var first string
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.Type().IsRegular() {
			if info, err := d.Info(); err == nil && info.Size() > 0 {
				first = path
				return filepath.SkipAll
			}
		}
		return nil
	})
	if err != nil && !os.IsNotExist(err) {
		return err
	}
	if first == "" {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dir, "x"), []byte{'x'}, 0o644)
	}
	f, err := os.OpenFile(first, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return err
	}
	last := make([]byte, 1)
	if _, err := f.ReadAt(last, info.Size()-1); err != nil {
		return err
	}
	last[0] ^= 0xff
	_, err = f.WriteAt(last, info.Size()-1)
	return err
}
