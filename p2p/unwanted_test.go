package p2p

import (
	"fmt"
	"log/slog"
	"testing"
	"time"

	pubsub "github.com/libp2p/go-libp2p-pubsub"
	pb "github.com/libp2p/go-libp2p-pubsub/pb"
)

// A payload a body validator does not want (node/view's bounds would
// refuse it) is ignored, not rejected: the forwarder keeps its score, as
// the view that refuses it is this peer's own. It is counted apart.
func TestUnwantedIsIgnored(t *testing.T) {
	ctx := t.Context()
	unwanted := func(Signed) error { return fmt.Errorf("%w: view full", ErrUnwanted) }
	p := newGossipPeer(t, ctx, GossipConfig{Network: "test", Log: slog.New(slog.DiscardHandler),
		Validators: map[string]BodyValidator{TopicOffers: unwanted}}, TopicOffers)
	k := newKey(t)
	s, err := Seal(k, "offer", whoBody{Who: "someone"}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	v := p.g.validator(TopicOffers, unwanted)
	if res := v(ctx, p.h.ID(), &pubsub.Message{Message: &pb.Message{Data: s.Raw}}); res != pubsub.ValidationIgnore {
		t.Fatalf("an unwanted payload's result = %v, want ValidationIgnore", res)
	}
	if n := p.g.Rejections()[ReasonUnwanted]; n != 1 {
		t.Fatalf("%d counted unwanted, want 1", n)
	}
}
