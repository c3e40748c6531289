package task

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"
)

func TestRetryBacksOffUntilSuccess(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		var at []time.Duration
		err := Retry(t.Context(), Backoff{First: time.Second, Most: 4 * time.Second}, time.Time{}, func() error {
			at = append(at, time.Since(start))
			if len(at) < 5 {
				return errors.New("not yet")
			}
			return nil
		})
		// Waits of 1s, 2s, 4s, 4s.
		want := []time.Duration{0, time.Second, 3 * time.Second, 7 * time.Second, 11 * time.Second}
		if err != nil || len(at) != len(want) {
			t.Fatalf("Retry = %v after tries at %v", err, at)
		}
		for i := range want {
			if at[i] != want[i] {
				t.Fatalf("tries at %v, want %v", at, want)
			}
		}
	})
}

func TestRetryStopsAtTheDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		tries := 0
		errLast := errors.New("down")
		err := Retry(t.Context(), Backoff{First: time.Second, Most: time.Minute}, start.Add(5*time.Second), func() error {
			tries++
			return errLast
		})
		// Tries at 0s, 1s, 3s; the next would start at 7s.
		if err != errLast || tries != 3 || time.Since(start) != 3*time.Second {
			t.Fatalf("Retry = %v after %d tries and %v", err, tries, time.Since(start))
		}
	})
}

func TestRetryStopsWithTheContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithTimeout(t.Context(), 2500*time.Millisecond)
		defer cancel()
		start := time.Now()
		tries := 0
		errLast := errors.New("down")
		err := Retry(ctx, Backoff{First: time.Second, Most: time.Second}, time.Time{}, func() error {
			tries++
			return errLast
		})
		if err != errLast || tries != 3 || time.Since(start) != 2500*time.Millisecond {
			t.Fatalf("Retry = %v after %d tries and %v", err, tries, time.Since(start))
		}
	})
}

func TestRetryStopsOnAFinalError(t *testing.T) {
	errGone := errors.New("gone")
	tries := 0
	err := Retry(context.Background(), Backoff{First: time.Hour, Most: time.Hour}, time.Time{}, func() error {
		tries++
		return Final(errGone)
	})
	if err != errGone || tries != 1 {
		t.Fatalf("Retry = %v after %d tries, want %v after 1", err, tries, errGone)
	}
	if Final(nil) != nil {
		t.Fatal("Final(nil) is not nil")
	}
}
