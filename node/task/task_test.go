package task

import (
	"context"
	"strings"
	"testing"
	"testing/synctest"
	"time"
)

func TestGroupRefusesWorkOnceClosingAndWaits(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var g Group
		release := make(chan struct{})
		ended := false
		if !g.Go(func() { <-release; ended = true }) {
			t.Fatal("an open group refused work")
		}
		ctx, cancel := context.WithTimeout(t.Context(), time.Second)
		defer cancel()
		if err := g.Wait(ctx); err == nil {
			t.Fatal("Wait returned before the goroutine ended")
		}
		if g.Go(func() {}) {
			t.Fatal("a closing group started new work")
		}
		close(release)
		if err := g.Wait(t.Context()); err != nil || !ended {
			t.Fatalf("Wait = %v, goroutine ended %t", err, ended)
		}
	})
}

func TestGroupRecoversAPanicWhenAsked(t *testing.T) {
	var got any
	var stack []byte
	g := Group{OnPanic: func(v any, s []byte) { got, stack = v, s }}
	g.Go(func() { panic("boom") })
	ran := false
	g.Go(func() { ran = true })
	if err := g.Wait(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got != "boom" || !strings.Contains(string(stack), "TestGroupRecoversAPanicWhenAsked") || !ran {
		t.Fatalf("recovered %v, stack %d bytes, other goroutine ran %v", got, len(stack), ran)
	}
}

func TestSleep(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		if err := Sleep(t.Context(), time.Minute); err != nil || time.Since(start) != time.Minute {
			t.Fatalf("Sleep(1m) = %v after %v", err, time.Since(start))
		}

		ctx, cancel := context.WithTimeout(t.Context(), time.Second)
		defer cancel()
		start = time.Now()
		if err := Sleep(ctx, time.Hour); err != context.DeadlineExceeded || time.Since(start) != time.Second {
			t.Fatalf("Sleep(1h) with a 1s deadline = %v after %v", err, time.Since(start))
		}
		if err := Sleep(ctx, 0); err != context.DeadlineExceeded {
			t.Fatalf("Sleep(0) on an ended context = %v", err)
		}
		if err := Sleep(ctx, -time.Second); err != context.DeadlineExceeded {
			t.Fatalf("Sleep(-1s) on an ended context = %v", err)
		}
		if err := Sleep(t.Context(), 0); err != nil {
			t.Fatalf("Sleep(0) = %v", err)
		}
	})
}
