//go:build !byzantine

package main

import "testing"

// A default daemon cannot be asked to misbehave: the flag, and the code
// behind it, come only with the byzantine build tag.
func TestDefaultBuildHasNoMisbehaveFlag(t *testing.T) {
	if f := newCommand().Flags().Lookup("misbehave"); f != nil {
		t.Fatalf("the default build has --%s", f.Name)
	}
}
