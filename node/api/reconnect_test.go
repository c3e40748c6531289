package api

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"testing"
	"testing/synctest"
	"time"
)

// unreachableFor is a call that finds no daemon for its first n tries,
// then returns end.
func unreachableFor(n int, end error) (call func(context.Context) error, tries *int) {
	tries = new(int)
	return func(context.Context) error {
		*tries++
		if *tries <= n {
			return fmt.Errorf("%w at test: connection refused", ErrNoDaemon)
		}
		return end
	}, tries
}

// A daemon away for a while is asked again until it answers, with one
// line when it goes and one when it is back; one that stays away longer
// than For ends the call with ErrNoDaemon, saying how long it was tried.
func TestReconnectOutlastsARestart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var lost, back int
		var away time.Duration
		r := &Reconnect{For: time.Minute, Every: time.Second,
			Lost: func(error) { lost++ },
			Back: func(d time.Duration) { back++; away = d }}
		call, tries := unreachableFor(5, nil)
		if err := r.Do(context.Background(), call); err != nil {
			t.Fatal(err)
		}
		if *tries != 6 || lost != 1 || back != 1 || away != 5*time.Second {
			t.Fatalf("%d tries, lost said %d times, back %d times after %s; want 6, 1, 1, 5s", *tries, lost, back, away)
		}
		// A second outage is said again.
		call, _ = unreachableFor(2, nil)
		if err := r.Do(context.Background(), call); err != nil || lost != 2 || back != 2 {
			t.Fatalf("second outage: %v, lost %d, back %d", err, lost, back)
		}

		start := time.Now()
		call, _ = unreachableFor(1000, nil)
		err := r.Do(context.Background(), call)
		if !errors.Is(err, ErrNoDaemon) || time.Since(start) != time.Minute || back != 2 {
			t.Fatalf("a daemon gone for good: %v after %s (back said %d times)", err, time.Since(start), back)
		}
	})
}

// An answer that is not "no daemon" (a job not found, a request refused)
// ends the call at once; so does a Reconnect with no time to try, and a
// nil one.
func TestReconnectEndsAtOnceOnAnAnswer(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		notFound := &StatusError{Code: http.StatusNotFound, Msg: "job x: not found"}
		r := &Reconnect{For: time.Minute, Lost: func(error) { t.Error("lost said for an answer") }}
		call, tries := unreachableFor(0, notFound)
		if err := r.Do(context.Background(), call); err != notFound || *tries != 1 {
			t.Fatalf("%v after %d tries, want the 404 after 1", err, *tries)
		}
		for _, r := range []*Reconnect{{}, nil} {
			call, tries := unreachableFor(1, nil)
			if err := r.Do(context.Background(), call); !errors.Is(err, ErrNoDaemon) || *tries != 1 {
				t.Fatalf("%+v: %v after %d tries, want no daemon after 1", r, err, *tries)
			}
		}
		// A stopping daemon answers 503, which is asked again.
		stopping := &StatusError{Code: http.StatusServiceUnavailable, Msg: "the daemon is stopping"}
		if !errors.Is(stopping, ErrNoDaemon) {
			t.Fatal("a 503 is not taken for a daemon away")
		}
		ctx, cancel := context.WithCancel(context.Background())
		r = &Reconnect{For: time.Minute, Lost: func(error) { cancel() }}
		if err := r.Do(ctx, func(context.Context) error { return stopping }); !errors.Is(err, context.Canceled) {
			t.Fatalf("stopped while asking again: %v", err)
		}
	})
}
