package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"time"
)

// workDir makes a fresh folder under parent ("": the system's temp folder)
// for one run's daemons and data, and returns it with what the run does
// when it ends: remove the folder, or, with keep, say where it was kept.
func workDir(parent, prefix string, keep bool, stderr io.Writer) (dir string, done func(), err error) {
	dir, err = os.MkdirTemp(parent, prefix)
	if err != nil {
		return "", nil, err
	}
	if keep {
		return dir, func() { fmt.Fprintf(stderr, "kept the work dir (data dirs and logs) in %s\n", dir) }, nil
	}
	return dir, func() { os.RemoveAll(dir) }, nil
}

// progress is the log the benchmarks get: each line on stderr, headed by
// the seconds since the command began.
func progress(stderr io.Writer) func(format string, args ...any) {
	began := time.Now()
	return func(format string, args ...any) {
		fmt.Fprintf(stderr, "[%6.1fs] %s\n", time.Since(began).Seconds(), fmt.Sprintf(format, args...))
	}
}

// lines is the log of the benchmarks that print plain progress lines.
func lines(stderr io.Writer) func(format string, args ...any) {
	return func(format string, args ...any) { fmt.Fprintf(stderr, format+"\n", args...) }
}

// jsonOut prints a report for --json.
func jsonOut(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// printReport prints a bench's report v: as JSON for --json, else with
// text, its way of printing itself for people.
func printReport(w io.Writer, asJSON bool, v any, text func(io.Writer) error) error {
	if asJSON {
		return jsonOut(w, v)
	}
	return text(w)
}
