//go:build !byzantine

package main

import (
	"github.com/spf13/pflag"

	"github.com/e31network/e31/node/provider"
)

// misbehaveFlag adds nothing: only a build with the byzantine tag can make
// a provider misbehave (misbehave.go).
func misbehaveFlag(*pflag.FlagSet) func() (provider.Misbehaviour, error) {
	return func() (provider.Misbehaviour, error) { return nil, nil }
}
