package main

import (
	"bytes"
	"context"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/e31network/e31/node/api"
)

// lockedBuffer collects a child's stderr while the test reads it.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// buildDaemon compiles this command into dir.
func buildDaemon(t *testing.T, dir string) string {
	t.Helper()
	bin := filepath.Join(dir, "e31d")
	cmd := exec.Command("go", "build", "-o", bin, ".")
	cmd.Env = os.Environ()
	if os.Getenv("CGO_CFLAGS") == "" {
		cmd.Env = append(cmd.Env, "CGO_CFLAGS=-O2 -g -Wno-deprecated-declarations")
	}
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build e31d: %v\n%s", err, out)
	}
	return bin
}

// TestNotifyReadyOnceTheAPIAnswers starts a real e31d as systemd would,
// with NOTIFY_SOCKET naming a socket the test listens on: READY=1 must come
// when the API already answers, and STOPPING=1 on SIGTERM. With simulated
// GPUs the daemon also proves its runtime with a probe container (where
// runc works), which must not be disturbed by the notify socket.
func TestNotifyReadyOnceTheAPIAnswers(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and starts e31d")
	}
	dir, err := os.MkdirTemp("", "e31-notify-") // short: unix socket paths are limited to 108 bytes
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	bin := buildDaemon(t, dir)
	sock := filepath.Join(dir, "notify.sock")
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: sock, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()

	data := filepath.Join(dir, "data")
	var logs lockedBuffer
	cmd := exec.Command(bin, "--data", data, "--listen", "/ip4/127.0.0.1/tcp/0", "--sim-gpus", "1xH100:80GiB", "--log-level", "debug")
	cmd.Env = append(os.Environ(), "NOTIFY_SOCKET="+sock)
	cmd.Stderr = &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			<-done
		}
	})

	read := func(within time.Duration) string {
		t.Helper()
		buf := make([]byte, 4096)
		_ = conn.SetReadDeadline(time.Now().Add(within))
		n, err := conn.Read(buf)
		if err != nil {
			t.Fatalf("no notification within %s: %v\ne31d log:\n%s", within, err, logs.String())
		}
		return string(buf[:n])
	}
	msg := read(2 * time.Minute)
	if !strings.HasPrefix(msg, "READY=1\n") || !strings.Contains(msg, "STATUS=") {
		t.Fatalf("first message %q, want READY=1 with a STATUS", msg)
	}
	// Ready means the API answers now, without a retry.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	id, err := api.NewClient(filepath.Join(data, "e31.sock")).ID(ctx)
	if err != nil {
		t.Fatalf("READY=1 came, but the API does not answer: %v", err)
	}
	if id.PeerID == "" {
		t.Errorf("the API answered without a peer ID: %+v", id)
	}

	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if msg := read(time.Minute); msg != "STOPPING=1" {
		t.Errorf("after SIGTERM %q, want STOPPING=1", msg)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("e31d exited with %v after SIGTERM\n%s", err, logs.String())
		}
	case <-time.After(time.Minute):
		t.Fatalf("e31d did not exit within a minute of SIGTERM\n%s", logs.String())
	}
	if os.Getenv("E31_REQUIRE_RUNC") != "" && !strings.Contains(logs.String(), "container runtime ready") {
		t.Errorf("the runtime's probe did not pass with the daemon started by systemd:\n%s", logs.String())
	}
	if strings.Contains(logs.String(), "not telling systemd") {
		t.Errorf("the notify socket was refused:\n%s", logs.String())
	}
}

func TestTakeNotifySocket(t *testing.T) {
	t.Setenv("NOTIFY_SOCKET", "@abstract/e31")
	n, err := takeNotifySocket()
	if err != nil || n.addr == nil || n.addr.Name != "@abstract/e31" {
		t.Errorf("abstract socket: %+v, %v", n, err)
	}
	if _, ok := os.LookupEnv("NOTIFY_SOCKET"); ok {
		t.Error("NOTIFY_SOCKET left in the environment, where runc would act on it")
	}
	t.Setenv("NOTIFY_SOCKET", "vsock:2:1234")
	if _, err := takeNotifySocket(); err == nil {
		t.Error("a vsock address was taken for a unix socket")
	}
	os.Unsetenv("NOTIFY_SOCKET")
	n, err = takeNotifySocket()
	if err != nil || n.addr != nil {
		t.Errorf("without NOTIFY_SOCKET: %+v, %v", n, err)
	}
	if err := n.send("READY=1"); err != nil {
		t.Errorf("send without a socket: %v", err)
	}
}
