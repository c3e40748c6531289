package p2p

import (
	"sync/atomic"
	"time"

	pubsub "github.com/libp2p/go-libp2p-pubsub"
	pb "github.com/libp2p/go-libp2p-pubsub/pb"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/protocol"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
)

// What the gossip meter counts, by topic: the three E31 topics, and
// TopicNone for what names no topic (IWANT and IDONTWANT, which carry only
// message IDs, subscriptions, and topics of other networks).
const TopicNone = "none"

// Kinds of gossip messages the meter counts (GossipCounts.Messages). The
// first five are copies of topic messages; the control kinds count the
// entries of control messages this peer received (an IHAVE or IWANT of n
// message IDs counts n).
const (
	// KindDelivered: a first copy, validated and delivered.
	KindDelivered = "delivered"
	// KindDuplicate: a copy of a message already seen, dropped before
	// validation.
	KindDuplicate = "duplicate"
	// KindRejected: a copy rejected by validation (its forwarder is
	// penalised).
	KindRejected = "rejected"
	// KindIgnored: a copy dropped without penalty (validation ignored it,
	// a limit throttled it, or a queue was full).
	KindIgnored = "ignored"
	// KindSent: a copy sent to one peer, this peer's own or forwarded.
	KindSent      = "sent"
	KindIHave     = "ihave"
	KindIWant     = "iwant"
	KindIDontWant = "idontwant"
	KindGraft     = "graft"
	KindPrune     = "prune"
)

// The meter's counter indexes: the kinds in GossipKinds' order, then the
// topics in GossipTopics' order.
const (
	iDelivered = iota
	iDuplicate
	iRejected
	iIgnored
	iSent
	iIHave
	iIWant
	iIDontWant
	iGraft
	iPrune
	nKinds
)

// GossipKinds returns every kind the meter counts, in a stable order.
func GossipKinds() []string {
	return []string{KindDelivered, KindDuplicate, KindRejected, KindIgnored, KindSent,
		KindIHave, KindIWant, KindIDontWant, KindGraft, KindPrune}
}

// GossipTopics returns every topic label the meter counts under.
func GossipTopics() []string { return []string{TopicOffers, TopicJobs, TopicDigest, TopicNone} }

const (
	iOffers = iota
	iJobs
	iDigest
	iNone
	nTopics
)

// meter is a pubsub RawTracer that counts, per topic, the copies of
// messages received and sent and the bytes of the RPCs that carry them in
// each direction: what one peer pays for the network's gossip. Its
// counters are atomics, as pubsub calls tracers synchronously from its
// event loop and from the goroutines that write to each peer.
type meter struct {
	offers, jobs, digest string // full topic names; immutable
	network              string // immutable: the topics of its other markets (Gossip.Join) count too
	msgs                 [nTopics][nKinds]atomic.Uint64
	bytesIn              [nTopics]atomic.Uint64
	bytesOut             [nTopics]atomic.Uint64
}

// newMeter meters the topics of a shard's scope (Shard.Scope) and of its
// network.
func newMeter(scope, network string) *meter {
	return &meter{offers: TopicName(scope, TopicOffers), jobs: TopicName(scope, TopicJobs), digest: TopicName(network, TopicDigest), network: network}
}

func (m *meter) topic(name string) int {
	switch name {
	case m.offers:
		return iOffers
	case m.jobs:
		return iJobs
	case m.digest:
		return iDigest
	}
	switch short, _ := topicShort(m.network, name); short {
	case TopicOffers:
		return iOffers
	case TopicJobs:
		return iJobs
	}
	return iNone
}

// field is the bytes a length-delimited field of n bytes takes in its
// parent message: its tag, its length and itself.
func field(n int) uint64 { return uint64(1 + protowire.SizeVarint(uint64(n)) + n) }

// rpcBytes adds the bytes of rpc to per, by topic: each published message
// to its topic, each IHAVE, GRAFT and PRUNE to its topic, and the rest
// (IWANT, IDONTWANT, subscriptions, the length prefix of the RPC on the
// stream) to TopicNone. The sizes are protobuf's; the transport's own
// framing (noise, yamux, TCP) is not counted.
func (m *meter) rpcBytes(rpc *pubsub.RPC, per *[nTopics]atomic.Uint64) {
	var total uint64
	for _, msg := range rpc.GetPublish() {
		n := field(proto.Size(msg))
		per[m.topic(msg.GetTopic())].Add(n)
		total += n
	}
	if c := rpc.GetControl(); c != nil {
		var attributed uint64
		for _, ih := range c.GetIhave() {
			n := field(proto.Size(ih))
			per[m.topic(ih.GetTopicID())].Add(n)
			attributed += n
		}
		for _, g := range c.GetGraft() {
			n := field(proto.Size(g))
			per[m.topic(g.GetTopicID())].Add(n)
			attributed += n
		}
		for _, p := range c.GetPrune() {
			n := field(proto.Size(p))
			per[m.topic(p.GetTopicID())].Add(n)
			attributed += n
		}
		whole := field(proto.Size(c))
		per[iNone].Add(whole - min(whole, attributed))
		total += whole
	}
	var rest uint64
	for _, s := range rpc.GetSubscriptions() {
		rest += field(proto.Size(s))
	}
	total += rest
	per[iNone].Add(rest + uint64(protowire.SizeVarint(total)))
}

func (m *meter) control(c *pb.ControlMessage) {
	if c == nil {
		return
	}
	for _, ih := range c.GetIhave() {
		m.msgs[m.topic(ih.GetTopicID())][iIHave].Add(uint64(len(ih.GetMessageIDs())))
	}
	for _, iw := range c.GetIwant() {
		m.msgs[iNone][iIWant].Add(uint64(len(iw.GetMessageIDs())))
	}
	for _, idw := range c.GetIdontwant() {
		m.msgs[iNone][iIDontWant].Add(uint64(len(idw.GetMessageIDs())))
	}
	for _, g := range c.GetGraft() {
		m.msgs[m.topic(g.GetTopicID())][iGraft].Add(1)
	}
	for _, p := range c.GetPrune() {
		m.msgs[m.topic(p.GetTopicID())][iPrune].Add(1)
	}
}

// received counts an incoming RPC's bytes before the Guard's limits trim
// it (the Guard's RPC inspector calls it), so that what a peer was sent
// and dropped is counted too; pubsub traces the RPC (RecvRPC) only after
// the trim.
func (m *meter) received(rpc *pubsub.RPC) { m.rpcBytes(rpc, &m.bytesIn) }

func (m *meter) RecvRPC(rpc *pubsub.RPC) { m.control(rpc.GetControl()) }

func (m *meter) SendRPC(rpc *pubsub.RPC, _ peer.ID) {
	m.rpcBytes(rpc, &m.bytesOut)
	for _, msg := range rpc.GetPublish() {
		m.msgs[m.topic(msg.GetTopic())][iSent].Add(1)
	}
}

func (m *meter) DeliverMessage(msg *pubsub.Message) {
	m.msgs[m.topic(msg.GetTopic())][iDelivered].Add(1)
}

func (m *meter) DuplicateMessage(msg *pubsub.Message) {
	m.msgs[m.topic(msg.GetTopic())][iDuplicate].Add(1)
}

func (m *meter) RejectMessage(msg *pubsub.Message, reason string) {
	k := iIgnored
	switch reason {
	case pubsub.RejectValidationFailed, pubsub.RejectInvalidSignature, pubsub.RejectUnexpectedSignature,
		pubsub.RejectUnexpectedAuthInfo, pubsub.RejectMissingSignature, pubsub.RejectBlacklstedPeer,
		pubsub.RejectBlacklistedSource:
		k = iRejected
	}
	m.msgs[m.topic(msg.GetTopic())][k].Add(1)
}

func (*meter) OnNewOutboundStream(peer.ID, protocol.ID)             {}
func (*meter) OnClosedOutboundStream(peer.ID)                       {}
func (*meter) Join(string)                                          {}
func (*meter) Leave(string)                                         {}
func (*meter) Graft(peer.ID, string)                                {}
func (*meter) Prune(peer.ID, string)                                {}
func (*meter) ValidateMessage(*pubsub.Message)                      {}
func (*meter) ThrottlePeer(peer.ID)                                 {}
func (*meter) SendRPCCompleted(*pubsub.RPC, peer.ID, time.Duration) {}
func (*meter) DropRPC(*pubsub.RPC, peer.ID)                         {}
func (*meter) UndeliverableMessage(*pubsub.Message)                 {}

// GossipCounts is what one peer's gossip has cost it since it started.
type GossipCounts struct {
	// Messages counts copies and control entries by topic and kind (the
	// Kind constants); every topic and kind is present.
	Messages map[string]map[string]uint64
	// BytesIn and BytesOut count the RPC bytes received and sent, by topic.
	BytesIn, BytesOut map[string]uint64
}

// Counts returns what the gossip has carried so far.
func (g *Gossip) Counts() GossipCounts {
	c := GossipCounts{Messages: map[string]map[string]uint64{}, BytesIn: map[string]uint64{}, BytesOut: map[string]uint64{}}
	for ti, t := range GossipTopics() {
		byKind := make(map[string]uint64, nKinds)
		for ki, k := range GossipKinds() {
			byKind[k] = g.meter.msgs[ti][ki].Load()
		}
		c.Messages[t] = byKind
		c.BytesIn[t] = g.meter.bytesIn[ti].Load()
		c.BytesOut[t] = g.meter.bytesOut[ti].Load()
	}
	return c
}
