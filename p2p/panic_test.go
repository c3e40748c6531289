package p2p

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/e31network/e31/testnet/poll"
	pubsub "github.com/libp2p/go-libp2p-pubsub"
	pb "github.com/libp2p/go-libp2p-pubsub/pb"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/protocol"
)

// panicLog is a log sink and a panic hook that serving goroutines write to
// while the test reads them.
type panicLog struct {
	mu     sync.Mutex
	b      strings.Builder
	wheres []string
}

func (p *panicLog) Write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.b.Write(b)
}

func (p *panicLog) panicked(where string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.wheres = append(p.wheres, where)
}

func (p *panicLog) logger() *slog.Logger { return slog.New(slog.NewTextHandler(p, nil)) }

func (p *panicLog) told() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.wheres...)
}

func (p *panicLog) text() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.b.String()
}

// A handler that panics fails only the request it was answering: the
// caller is refused with CodeInternal, the panic is logged with its stack
// and told to the hook, and the host answers the next request.
func TestServeRecoversHandlerPanic(t *testing.T) {
	ctx := t.Context()
	const proto = protocol.ID("/e31-test/panic/1")
	server, _ := newTestHost(t)
	client, _ := newTestHost(t)
	var pl panicLog
	Serve(ctx, server, proto, 10*time.Second, pl.logger(), func(_ context.Context, _ peer.ID, req json.RawMessage) (any, error) {
		var s string
		if err := DecodeStrict(req, &s); err != nil {
			return nil, err
		}
		if s == "boom" {
			var m map[string]int
			m["boom"]++ // a nil map: a bug that a peer's input reached
		}
		return "echo " + s, nil
	}, OnPanic(pl.panicked))
	if err := client.Connect(ctx, peer.AddrInfo{ID: server.ID(), Addrs: server.Addrs()}); err != nil {
		t.Fatal(err)
	}

	err := Call(ctx, client, server.ID(), proto, "boom", nil)
	var re *RemoteError
	if !errors.As(err, &re) || re.Code != CodeInternal || re.Msg != "internal error" {
		t.Fatalf("Call to a panicking handler = %v, want an internal error refused with %q", err, CodeInternal)
	}
	if got := pl.told(); len(got) != 1 || got[0] != PanicStream {
		t.Errorf("hook told %q, want [%s]", got, PanicStream)
	}
	if l := pl.text(); !strings.Contains(l, `level=ERROR msg="panic recovered" where=stream panic="assignment to entry in nil map"`) ||
		!strings.Contains(l, "stack=") || !strings.Contains(l, "proto="+string(proto)) {
		t.Errorf("log does not show the recovered panic with its stack and protocol:\n%s", l)
	}

	var out string
	if err := Call(ctx, client, server.ID(), proto, "again", &out); err != nil || out != "echo again" {
		t.Fatalf("Call after the panic = %q, %v; want the host still serving", out, err)
	}
}

// A body validator that panics on a message drops that message (ignored,
// so the honest forwarder keeps its score), logs and counts it, and lets
// the messages after it through.
func TestGossipValidatorPanicDropsTheMessage(t *testing.T) {
	ctx := t.Context()
	var pl panicLog
	quiet := slog.New(slog.DiscardHandler)
	a := newGossipPeer(t, ctx, GossipConfig{Network: "test", Log: quiet}, TopicOffers)
	panicky := func(s Signed) error {
		var b whoBody
		if err := s.Decode(&b); err != nil {
			return err
		}
		if b.Who == "boom" {
			panic("validator bug")
		}
		return nil
	}
	b := newGossipPeer(t, ctx, GossipConfig{Network: "test", Log: pl.logger(), Panicked: pl.panicked,
		Validators: map[string]BodyValidator{TopicOffers: panicky}}, TopicOffers)
	connect(t, ctx, a.h, b.h)

	// The path from A to B is up once a message gets through.
	poll.Until(t, "a message from A to reach B", 10*time.Second, func() bool {
		if _, err := a.g.Publish(ctx, TopicOffers, "offer", whoBody{Who: "warm"}); err != nil {
			t.Fatal(err)
		}
		rctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
		defer cancel()
		_, err := b.sub.Next(rctx)
		return err == nil
	})
	if _, err := a.g.Publish(ctx, TopicOffers, "offer", whoBody{Who: "boom"}); err != nil {
		t.Fatal(err)
	}
	if _, err := a.g.Publish(ctx, TopicOffers, "offer", whoBody{Who: "after"}); err != nil {
		t.Fatal(err)
	}
	rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	for {
		s, err := b.sub.Next(rctx)
		if err != nil {
			t.Fatalf("the message after the panicking one never came: %v", err)
		}
		var body whoBody
		if err := s.Decode(&body); err != nil {
			t.Fatal(err)
		}
		if body.Who == "boom" {
			t.Fatal("the message whose validation panicked was delivered")
		}
		if body.Who == "after" {
			break
		}
	}
	// Validation runs in pubsub's workers: the next message may be
	// delivered before the panicking one's validation is over.
	poll.Until(t, "the panic to be told", 10*time.Second, func() bool { return len(pl.told()) > 0 })
	if got := pl.told(); len(got) != 1 || got[0] != PanicGossipValidate {
		t.Errorf("hook told %q, want [%s]", got, PanicGossipValidate)
	}
	if l := pl.text(); !strings.Contains(l, `msg="panic recovered" where=gossip-validate panic="validator bug" topic=offers`) || !strings.Contains(l, "stack=") {
		t.Errorf("log does not show the recovered panic with its stack:\n%s", l)
	}
	// B's own publish of such a body is refused, not a crash.
	if _, err := b.g.Publish(ctx, TopicOffers, "offer", whoBody{Who: "boom"}); err == nil {
		t.Error("a local publish whose validation panicked was accepted")
	}
	// Ignored, not rejected: a rejection would cost the forwarder score.
	v := b.g.recovering(TopicOffers, func(context.Context, peer.ID, *pubsub.Message) pubsub.ValidationResult { panic("bug") })
	if res := v(ctx, a.h.ID(), &pubsub.Message{Message: &pb.Message{}}); res != pubsub.ValidationIgnore {
		t.Errorf("a panicking validator's result = %v, want ValidationIgnore", res)
	}
}
