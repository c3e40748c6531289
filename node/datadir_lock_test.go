package node

import (
	"context"
	"errors"
	"os"
	"strconv"
	"testing"
)

// A second lock on a data dir is refused with the holder's PID, and taken
// once the first is released.
func TestDataDirLock(t *testing.T) {
	dir := t.TempDir()
	first, err := lockDataDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	_, err = lockDataDir(dir)
	var inUse *DataDirInUseError
	if !errors.As(err, &inUse) || inUse.PID != os.Getpid() || inUse.Dir != dir {
		t.Fatalf("second lock: %v, want this process's PID %d on %s", err, os.Getpid(), dir)
	}
	if want := "e31d PID " + strconv.Itoa(os.Getpid()) + " already runs on this data dir (" + dir + ")"; err.Error() != want {
		t.Fatalf("error %q, want %q", err, want)
	}
	if err := first.Release(); err != nil {
		t.Fatal(err)
	}
	again, err := lockDataDir(dir)
	if err != nil {
		t.Fatalf("lock after release: %v", err)
	}
	_ = again.Release()
}

// A second node on a running node's data dir fails with the lock's error,
// not a store's, and starts once the first has stopped.
func TestSecondNodeOnDataDir(t *testing.T) {
	dir := t.TempDir()
	first := startNode(t, nodeOpts{dir: dir})
	cfg := Config{DataDir: dir, Listen: []string{"/ip4/127.0.0.1/tcp/0"}, API: "127.0.0.1:0", DebugDiskFree: 1 << 40}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	n, err := New(ctx, cfg)
	if err == nil {
		cancel()
		_ = n.Run(ctx)
		t.Fatal("a second node opened a running node's data dir")
	}
	var inUse *DataDirInUseError
	if !errors.As(err, &inUse) || inUse.PID != os.Getpid() {
		t.Fatalf("error %v, want a DataDirInUseError naming PID %d", err, os.Getpid())
	}
	first.cancel()
	<-first.done
	n, err = New(ctx, cfg)
	if err != nil {
		t.Fatalf("after the first stopped: %v", err)
	}
	cancel()
	_ = n.Run(ctx)
}
