package p2p

import (
	"context"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/e31network/e31/testnet/poll"
	pubsub "github.com/libp2p/go-libp2p-pubsub"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/protocol"
)

// rpcCounter counts what pubsub sends: RPCs, message copies, and RPCs
// carrying control messages (IHAVE, IWANT, IDONTWANT, GRAFT, PRUNE).
type rpcCounter struct {
	rpcs, copies, control, idontwant atomic.Int64
	grafts                           atomic.Int64
}

func (c *rpcCounter) SendRPC(r *pubsub.RPC, _ peer.ID) {
	c.rpcs.Add(1)
	c.copies.Add(int64(len(r.GetPublish())))
	if r.Control != nil {
		c.control.Add(1)
		c.idontwant.Add(int64(len(r.Control.GetIdontwant())))
	}
}

func (c *rpcCounter) Graft(peer.ID, string) { c.grafts.Add(1) }

func (c *rpcCounter) reset() {
	c.rpcs.Store(0)
	c.copies.Store(0)
	c.control.Store(0)
	c.idontwant.Store(0)
}

func (*rpcCounter) OnNewOutboundStream(peer.ID, protocol.ID)             {}
func (*rpcCounter) OnClosedOutboundStream(peer.ID)                       {}
func (*rpcCounter) Join(string)                                          {}
func (*rpcCounter) Leave(string)                                         {}
func (*rpcCounter) Prune(peer.ID, string)                                {}
func (*rpcCounter) ValidateMessage(*pubsub.Message)                      {}
func (*rpcCounter) DeliverMessage(*pubsub.Message)                       {}
func (*rpcCounter) RejectMessage(*pubsub.Message, string)                {}
func (*rpcCounter) DuplicateMessage(*pubsub.Message)                     {}
func (*rpcCounter) ThrottlePeer(peer.ID)                                 {}
func (*rpcCounter) RecvRPC(*pubsub.RPC)                                  {}
func (*rpcCounter) SendRPCCompleted(*pubsub.RPC, peer.ID, time.Duration) {}
func (*rpcCounter) DropRPC(*pubsub.RPC, peer.ID)                         {}
func (*rpcCounter) UndeliverableMessage(*pubsub.Message)                 {}

func processCPU() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkGossipFanout publishes messages the size of a declaration, one
// at a time from each of ten fully connected peers in turn, and reports
// what delivering one to all ten costs: CPU of the whole process, the
// copies of it sent, and RPCs (the copies, and control such as IDONTWANT).
// "defaults" runs gossipsub's own parameters in the same run, as the
// baseline of the network's (RouterParams).
func BenchmarkGossipFanout(b *testing.B) {
	for _, bc := range []struct {
		name   string
		params pubsub.GossipSubParams
	}{
		{"defaults", pubsub.DefaultGossipSubParams()},
		{"e31", RouterParams()},
	} {
		b.Run(bc.name, func(b *testing.B) {
			benchFanout(b, 10, bc.params)
		})
	}
}

func benchFanout(b *testing.B, n int, params pubsub.GossipSubParams) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	counter := &rpcCounter{}
	extra := []pubsub.Option{pubsub.WithRawTracer(counter), pubsub.WithGossipSubParams(params)}
	type peerState struct {
		*gossipPeer
		got atomic.Int64
	}
	peers := make([]*peerState, n)
	for i := range peers {
		p := &peerState{gossipPeer: newGossipPeer(b, ctx, GossipConfig{Network: "bench", Extra: extra}, TopicJobs)}
		peers[i] = p
		for _, o := range peers[:i] {
			connect(b, ctx, p.h, o.h)
		}
		go func() {
			for {
				if _, err := p.sub.Next(ctx); err != nil {
					return
				}
				p.got.Add(1)
			}
		}()
	}
	// Every peer must have heard every other's subscription, and the
	// meshes must have formed (one heartbeat), before a message counts.
	poll.Until(b, "topic peers", 10*time.Second, func() bool {
		for _, p := range peers {
			if len(p.g.TopicPeers(TopicJobs)) < n-1 {
				return false
			}
		}
		return true
	})
	warm := struct{ Pad string }{Pad: "warm-up"}
	for i, p := range peers {
		if _, err := p.g.Publish(ctx, TopicJobs, "bench", warm); err != nil {
			b.Fatal(err)
		}
		poll.Until(b, "warm-up delivery", 10*time.Second, func() bool {
			for _, q := range peers {
				if q.got.Load() < int64(i+1) {
					return false
				}
			}
			return true
		})
	}
	body := struct{ Pad string }{Pad: strings.Repeat("d", 1200)}
	base := int64(n)
	counter.reset()
	cpu := processCPU()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := peers[i%n].g.Publish(ctx, TopicJobs, "bench", body); err != nil {
			b.Fatal(err)
		}
		want := base + int64(i+1)
		poll.Until(b, "delivery to every peer", 10*time.Second, func() bool {
			for _, p := range peers {
				if p.got.Load() < want {
					return false
				}
			}
			return true
		})
	}
	b.StopTimer()
	per := func(v int64) float64 { return float64(v) / float64(b.N) }
	b.ReportMetric(float64((processCPU()-cpu).Microseconds())/1000/float64(b.N), "cpu-ms/msg")
	b.ReportMetric(per(counter.copies.Load()), "copies/msg")
	b.ReportMetric(per(counter.rpcs.Load()), "rpcs/msg")
	b.ReportMetric(per(counter.control.Load()), "control-rpcs/msg")
}
