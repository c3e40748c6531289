package netns

import (
	"context"
	"os"
)

// TB is the part of testing.TB that NewForTest uses.
type TB interface {
	Helper()
	Cleanup(func())
	Errorf(format string, args ...any)
	Fatalf(format string, args ...any)
	Skip(args ...any)
}

// RequireEnv names the environment variable that turns a missing
// prerequisite from a skip into a failure, as in the other end-to-end tests.
const RequireEnv = "E31_REQUIRE_RUNC"

// NewForTest builds a Net for a test and closes it in the test's cleanup.
// Where a Net cannot be built it skips the test, or fails it when
// RequireEnv is set.
func NewForTest(t TB, opts Options) *Net {
	t.Helper()
	if err := Available(); err != nil {
		if os.Getenv(RequireEnv) != "" {
			t.Fatalf("%s is set but %v", RequireEnv, err)
		}
		t.Skip(err.Error())
	}
	n, err := New(context.Background(), opts)
	if err != nil {
		t.Fatalf("build the namespaces: %v", err)
	}
	t.Cleanup(func() {
		if err := n.Close(); err != nil {
			t.Errorf("%v", err)
		}
	})
	return n
}
