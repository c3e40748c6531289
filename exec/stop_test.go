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
	// Each shell says when its trap is set, by creating a file.
	ready := func(name string) string { return t.TempDir() + "/" + name }
	waitFile := func(path string) {
		deadline := time.Now().Add(10 * time.Second)
		for {
			if _, err := os.Stat(path); err == nil {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s never appeared", path)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	trapped, ignored := ready("trapped"), ready("ignored")
	catcher := start("sh", "-c", `trap 'exit 0' TERM; touch `+trapped+`; while :; do sleep 0.1; done`)
	ignorer := start("sh", "-c", `trap '' TERM; touch `+ignored+`; while :; do sleep 0.1; done`)
	sleeper := start("sleep", "600")
	waitFile(trapped)
	waitFile(ignored)
	for _, c := range []struct {
		name string
		pid  int
		want bool
	}{
		{"a shell with a trap", catcher.Process.Pid, true},
		{"a shell that ignores SIGTERM", ignorer.Process.Pid, false},
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
	deadline := time.Now().Add(10 * time.Second)
	for {
		b, err := os.ReadFile("/proc/" + strconv.Itoa(zombie.Process.Pid) + "/status")
		if err == nil && strings.Contains(string(b), "State:\tZ") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("true never became a zombie")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if got, err := catchesTerm(zombie.Process.Pid); err != nil || got {
		t.Errorf("a zombie: %v, %v", got, err)
	}
	if got, err := catchesTerm(1 << 30); err != nil || got {
		t.Errorf("a process that is gone: %v, %v", got, err)
	}
}
