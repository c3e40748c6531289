//go:build !byzantine

package main

import "github.com/spf13/pflag"

// misbehaveFlag adds nothing: only a build with the byzantine tag can make
// a node misbehave (misbehave.go).
func misbehaveFlag(*pflag.FlagSet) func() (misbehaviour, error) {
	return func() (misbehaviour, error) { return misbehaviour{}, nil }
}
