package cluster

import (
	"slices"
	"testing"
)

func TestBuildEnvKeepsTheUsersCgoFlags(t *testing.T) {
	env := buildEnv([]string{"PATH=/usr/bin"})
	if !slices.Contains(env, quietNVML) {
		t.Errorf("no CGO_CFLAGS added: %q", env)
	}
	mine := []string{"PATH=/usr/bin", "CGO_CFLAGS=-O0"}
	if env := buildEnv(mine); !slices.Equal(env, mine) {
		t.Errorf("the user's CGO_CFLAGS were changed: %q", env)
	}
}
