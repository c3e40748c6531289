package exec

import (
	"os"
	osexec "os/exec"
	"strconv"
	"strings"
	"testing"
	"time"
)

// catchesTerm tells a process that handles SIGTERM (this one: the Go
// runtime does; a shell with a trap) from one that does not (sleep), one
// that ignores it, one that exited unreaped (a zombie) and one gone.
func TestCatchesTerm(t *testing.T) {
	if got, err := catchesTerm(os.Getpid()); err != nil || !got {
		t.Errorf("this process: %v, %v; the Go runtime handles SIGTERM", got, err)
	}
	start := func(args ...string) *osexec.Cmd {
		cmd := osexec.Command(args[0], args[1:]...)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
		return cmd
	}
	waitFor := func(what string, cond func() bool) {
		deadline := time.Now().Add(10 * time.Second)
		for !cond() {
			if time.Now().After(deadline) {
				t.Fatalf("timed out waiting for %s", what)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	// The shell says when its trap is set, by creating a file.
	trapped := t.TempDir() + "/trapped"
	catcher := start("sh", "-c", `trap 'exit 0' TERM; touch `+trapped+`; while :; do sleep 0.1; done`)
	// An ignored signal stays ignored across exec: sleep, ignoring
	// SIGTERM. (A shell looping on its own may block signals for a moment
	// around each fork, which counts as "may act".)
	ignorer := start("sh", "-c", `trap '' TERM; exec sleep 600`)
	sleeper := start("sleep", "600")
	waitFor("the shell's trap", func() bool {
		_, err := os.Stat(trapped)
		return err == nil
	})
	waitFor("the shell to exec sleep", func() bool {
		comm, err := os.ReadFile("/proc/" + strconv.Itoa(ignorer.Process.Pid) + "/comm")
		return err == nil && strings.TrimSpace(string(comm)) == "sleep"
	})
	for _, c := range []struct {
		name string
		pid  int
		want bool
	}{
		{"a shell with a trap", catcher.Process.Pid, true},
		{"sleep ignoring SIGTERM", ignorer.Process.Pid, false},
		{"sleep", sleeper.Process.Pid, false},
	} {
		if got, err := catchesTerm(c.pid); err != nil || got != c.want {
			t.Errorf("%s: %v, %v; want %v", c.name, got, err, c.want)
		}
	}
	if !mayActOnTerm([]int{sleeper.Process.Pid, catcher.Process.Pid}) {
		t.Error("a job with a shell that traps SIGTERM may not act on it")
	}
	if mayActOnTerm([]int{sleeper.Process.Pid, ignorer.Process.Pid}) {
		t.Error("a job whose processes neither catch nor block SIGTERM may act on it")
	}

	zombie := start("true")
	// Exited, not yet waited for: a zombie, until Cleanup reaps it.
	waitFor("true to become a zombie", func() bool {
		b, err := os.ReadFile("/proc/" + strconv.Itoa(zombie.Process.Pid) + "/status")
		return err == nil && strings.Contains(string(b), "State:\tZ")
	})
	if got, err := catchesTerm(zombie.Process.Pid); err != nil || got {
		t.Errorf("a zombie: %v, %v", got, err)
	}
	if got, err := catchesTerm(1 << 30); err != nil || got {
		t.Errorf("a process that is gone: %v, %v", got, err)
	}
}
