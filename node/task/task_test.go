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
