//go:build byzantine

package main

import (
	"fmt"
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
		strings.Join([]string{misSquat, misNoRun, misSilent, misWithholdReceipt, misFakeModel, misRawContent}, ", ")+
		" ("+misFakeModel+" claims "+fakeModel+" for every GPU; "+misRawContent+
		" serves POST /v1/debug/car, which stores a CAR's blocks unchecked, and submits jobs naming them)")
	return func() (misbehaviour, error) {
		var m misbehaviour
		b := &byzantine{}
		for _, n := range names {
			switch n {
			case misSquat, misNoRun, misSilent, misWithholdReceipt, misFakeModel:
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
