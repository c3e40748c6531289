package p2p

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
)

// gossipsub's warnings about tag bumps go to debug level; its other
// warnings stay warnings.
func TestPubsubLogQuietsTagBumps(t *testing.T) {
	for _, level := range []slog.Level{slog.LevelInfo, slog.LevelDebug} {
		var buf bytes.Buffer
		log := slog.New(pubsubLog{slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: level})}).With("component", "pubsub")
		log.Warn(bumpWarning, "err", "queue full (len=128)")
		log.Warn("slow heartbeat", "took", "200ms")
		out := buf.String()
		if !strings.Contains(out, `level=WARN msg="slow heartbeat" component=pubsub`) {
			t.Errorf("at %s, another warning lost or changed:\n%s", level, out)
		}
		bump := strings.Contains(out, bumpWarning)
		switch {
		case level == slog.LevelInfo && bump:
			t.Errorf("at %s, the tag bump warning logged:\n%s", level, out)
		case level == slog.LevelDebug && !strings.Contains(out, `level=DEBUG msg="`+bumpWarning+`" component=pubsub`):
			t.Errorf("at %s, the tag bump warning not logged at debug level:\n%s", level, out)
		}
	}
}
