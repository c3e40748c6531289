package main

import (
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"github.com/e31network/e31/node/api"
	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"
)

// progress shows transfers: a bar on a terminal, a line every few seconds
// otherwise, nothing at all for --json.
type progress struct {
	w       io.Writer
	silent  bool
	tty     bool
	bar     *progressbar.ProgressBar
	what    string
	started time.Time
	lastAt  time.Time
}

func newProgress(w io.Writer, silent bool) *progress {
	tty := false
	if f, ok := w.(*os.File); ok {
		tty = term.IsTerminal(int(f.Fd()))
	}
	return &progress{w: w, silent: silent, tty: tty}
}

func (p *progress) update(t api.Transfer) {
	if p.silent {
		return
	}
	if t.What != p.what {
		p.finish()
		p.what = t.What
		p.started = time.Now()
		if p.tty {
			p.bar = progressbar.NewOptions64(max(t.Total, 1),
				progressbar.OptionSetWriter(p.w),
				progressbar.OptionSetDescription(t.What),
				progressbar.OptionShowBytes(true),
				progressbar.OptionSetPredictTime(true),
				progressbar.OptionThrottle(100*time.Millisecond),
				progressbar.OptionClearOnFinish(),
			)
		}
	}
	if p.bar != nil {
		_ = p.bar.Set64(t.Done)
		return
	}
	if time.Since(p.lastAt) >= 2*time.Second || (t.Total > 0 && t.Done >= t.Total) {
		p.lastAt = time.Now()
		rate := float64(t.Done) / max(time.Since(p.started).Seconds(), 0.001)
		fmt.Fprintf(p.w, "%s: %s of %s (%s/s)\n", t.What, humanBytes(uint64(t.Done)), humanBytes(uint64(t.Total)), humanBytes(uint64(rate)))
	}
}

func (p *progress) finish() {
	if p.bar != nil {
		_ = p.bar.Finish()
		p.bar = nil
	}
	p.what = ""
}

// taskBar counts an array's tasks written, as one bar on a terminal and
// nothing otherwise (the summary line that follows says it all); safe
// for the writers of several tasks at once.
type taskBar struct {
	mu  sync.Mutex
	bar *progressbar.ProgressBar
}

func newTaskBar(w io.Writer, tasks int, silent bool) *taskBar {
	b := &taskBar{}
	if f, ok := w.(*os.File); ok && !silent && term.IsTerminal(int(f.Fd())) {
		b.bar = progressbar.NewOptions(tasks,
			progressbar.OptionSetWriter(w),
			progressbar.OptionSetDescription("writing tasks"),
			progressbar.OptionShowCount(),
			progressbar.OptionSetPredictTime(true),
			progressbar.OptionThrottle(100*time.Millisecond),
			progressbar.OptionClearOnFinish(),
		)
	}
	return b
}

func (b *taskBar) add() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.bar != nil {
		_ = b.bar.Add(1)
	}
}

func (b *taskBar) finish() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.bar != nil {
		_ = b.bar.Finish()
	}
}
