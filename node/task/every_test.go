package task

import (
	"context"
	"testing"
	"testing/synctest"
	"time"
)

func TestEveryCallsAtEachTickUntilCancelled(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		start := time.Now()
		var at []time.Duration
		done := make(chan struct{})
		go func() {
			defer close(done)
			Every(ctx, time.Second, func(now time.Time) { at = append(at, now.Sub(start)) })
		}()
		time.Sleep(3500 * time.Millisecond)
		cancel()
		<-done
		if len(at) != 3 || at[0] != time.Second || at[2] != 3*time.Second {
			t.Fatalf("calls at %v, want 1s, 2s, 3s", at)
		}
	})
}

func TestNowAndEveryCallsAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		start := time.Now()
		var at []time.Duration
		done := make(chan struct{})
		go func() {
			defer close(done)
			NowAndEvery(ctx, time.Second, func(now time.Time) { at = append(at, now.Sub(start)) })
		}()
		time.Sleep(2500 * time.Millisecond)
		cancel()
		<-done
		if len(at) != 3 || at[0] != 0 || at[2] != 2*time.Second {
			t.Fatalf("calls at %v, want 0s, 1s, 2s", at)
		}
		calls := 0
		NowAndEvery(ctx, time.Second, func(time.Time) { calls++ })
		if calls != 1 {
			t.Fatalf("NowAndEvery on an ended context called f %d times, want once", calls)
		}
	})
}

func TestEverySkipsTicksWhileBusy(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		defer cancel()
		calls := 0
		Every(ctx, time.Second, func(time.Time) {
			calls++
			time.Sleep(3500 * time.Millisecond)
		})
		// Calls at 1s, 4.5s and 8s (a tick waited for each), none at
		// 11.5s: the context ended at 10s.
		if calls != 3 {
			t.Fatalf("%d calls in 10s of 3.5s rounds every 1s, want 3", calls)
		}
	})
}
