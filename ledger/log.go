package ledger

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
)

// badgerLogger hands Badger's printf-style messages to slog. Badger narrates
// every open, flush and compaction at INFO; those are store internals, not
// node events, so they go out at debug level.
type badgerLogger struct{ log *slog.Logger }

func (b badgerLogger) Errorf(format string, args ...any) { b.emit(slog.LevelError, format, args) }
func (b badgerLogger) Warningf(format string, args ...any) {
	b.emit(slog.LevelWarn, format, args)
}
func (b badgerLogger) Infof(format string, args ...any)  { b.emit(slog.LevelDebug, format, args) }
func (b badgerLogger) Debugf(format string, args ...any) { b.emit(slog.LevelDebug, format, args) }

func (b badgerLogger) emit(level slog.Level, format string, args []any) {
	// Formatting is the expensive part; skip it when the level is off.
	if !b.log.Enabled(context.Background(), level) {
		return
	}
	b.log.Log(context.Background(), level, strings.TrimSpace(fmt.Sprintf(format, args...)), "component", "badger")
}
