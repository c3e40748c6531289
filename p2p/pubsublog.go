package p2p

import (
	"context"
	"log/slog"
)

// pubsubLog is the handler of gossipsub's log. gossipsub warns each time
// the connection manager's queue of tag bumps is full: every message it
// delivers bumps its sender's tag, and a busy node falls behind on them by
// the hundred, losing nothing but a little of those senders' standing
// should the connection manager trim connections. Those warnings are
// logged at debug level; the rest as they come.
type pubsubLog struct{ slog.Handler }

// bumpWarning is the message of gossipsub's warning about tag bumps.
const bumpWarning = "error bumping delivery tag"

func (h pubsubLog) Handle(ctx context.Context, r slog.Record) error {
	if r.Level == slog.LevelWarn && r.Message == bumpWarning {
		if !h.Handler.Enabled(ctx, slog.LevelDebug) {
			return nil
		}
		r.Level = slog.LevelDebug
	}
	return h.Handler.Handle(ctx, r)
}

func (h pubsubLog) WithAttrs(as []slog.Attr) slog.Handler {
	return pubsubLog{h.Handler.WithAttrs(as)}
}

func (h pubsubLog) WithGroup(name string) slog.Handler {
	return pubsubLog{h.Handler.WithGroup(name)}
}
