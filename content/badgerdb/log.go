// Package badgerdb is what every Badger store of a node shares (the content
// store, the ledger and the state store): Badger's log lines handed to slog,
// and an Open that gets past a known fault of Badger's after a crash.
package badgerdb

import (
	"context"
	"fmt"
	"log/slog"
	"strings"

	"github.com/dgraph-io/badger/v4"
)

// Logger is a badger.Logger writing to a slog.Logger, each line with
// component=badger. Badger narrates every open, flush and compaction at
// INFO; those are store internals, not node events, so they go out at
// debug level. Badger calls Debugf on every write, so a line is formatted
// only when its level is on.
type Logger struct{ log *slog.Logger }

var _ badger.Logger = Logger{}

// NewLogger returns a Logger writing to log; nil discards.
func NewLogger(log *slog.Logger) Logger {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return Logger{log: log}
}

func (l Logger) Errorf(f string, a ...any)   { l.emit(slog.LevelError, f, a) }
func (l Logger) Warningf(f string, a ...any) { l.emit(slog.LevelWarn, f, a) }
func (l Logger) Infof(f string, a ...any)    { l.emit(slog.LevelDebug, f, a) }
func (l Logger) Debugf(f string, a ...any)   { l.emit(slog.LevelDebug, f, a) }

func (l Logger) emit(level slog.Level, f string, a []any) {
	if !l.log.Enabled(context.Background(), level) {
		return
	}
	l.log.Log(context.Background(), level, strings.TrimSpace(fmt.Sprintf(f, a...)), "component", "badger")
}
