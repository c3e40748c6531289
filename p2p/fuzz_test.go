package p2p

import (
	"bytes"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"
	pbv2 "github.com/libp2p/go-libp2p/p2p/protocol/circuitv2/pb"
	"github.com/libp2p/go-libp2p/p2p/protocol/circuitv2/util"
)

func FuzzOpen(f *testing.F) {
	sk := newKey(f)
	s, _ := Seal(sk, "offer", map[string]any{"provider": "x", "gpus": []int{1, 2}}, time.Unix(1700000000, 0))
	f.Add(s.Raw)
	f.Add([]byte{})
	f.Add([]byte("\x0a\x02garbage"))
	f.Add(s.Raw[:len(s.Raw)/2])
	f.Fuzz(func(t *testing.T, data []byte) {
		got, err := Open(data)
		if err != nil {
			return
		}
		// Anything accepted must verify again and carry a kind and body.
		if got.Message.Kind == "" || len(got.Message.Body) == 0 {
			t.Fatalf("accepted a message without kind or body: %+v", got.Message)
		}
		if _, err := Open(got.Raw); err != nil {
			t.Fatalf("accepted payload does not reopen: %v", err)
		}
		// Read again without verifying, it is the same message.
		again, err := Reopen(data)
		if err != nil {
			t.Fatalf("Reopen of an accepted payload: %v", err)
		}
		if again.Signer != got.Signer || again.Message.Kind != got.Message.Kind || !bytes.Equal(again.Message.Body, got.Message.Body) || again.Message.Time != got.Message.Time {
			t.Fatalf("Reopen read %+v, Open %+v", again, got)
		}
	})
}

func FuzzReadFrame(f *testing.F) {
	var buf bytes.Buffer
	_ = WriteFrame(&buf, reply{Body: []byte(`{"a":1}`)})
	f.Add(buf.Bytes())
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 0x0f})
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		var r reply
		_ = ReadFrame(bytes.NewReader(data), &r)
	})
}

// FuzzReadHop: a relay reads any peer's hop request without failing
// otherwise than with an error, and what it accepts is a reservation or
// a circuit to a peer it can name.
func FuzzReadHop(f *testing.F) {
	msg := func(m *pbv2.HopMessage) []byte {
		var buf bytes.Buffer
		_ = util.NewDelimitedWriter(&buf).WriteMsg(m)
		return buf.Bytes()
	}
	p, _ := peer.IDFromPrivateKey(newKey(f))
	f.Add(msg(&pbv2.HopMessage{Type: pbv2.HopMessage_RESERVE.Enum()}))
	f.Add(msg(&pbv2.HopMessage{Type: pbv2.HopMessage_CONNECT.Enum(), Peer: util.PeerInfoToPeerV2(peer.AddrInfo{ID: p})}))
	f.Add(msg(&pbv2.HopMessage{Type: pbv2.HopMessage_CONNECT.Enum()}))
	f.Add(msg(&pbv2.HopMessage{Type: pbv2.HopMessage_CONNECT.Enum(), Peer: &pbv2.Peer{Id: []byte("not a peer")}}))
	f.Add(msg(&pbv2.HopMessage{Type: pbv2.HopMessage_STATUS.Enum(), Status: pbv2.Status_OK.Enum()}))
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 0x0f})
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := readHop(bytes.NewReader(data))
		if err != nil {
			return
		}
		switch m.GetType() {
		case pbv2.HopMessage_RESERVE:
		case pbv2.HopMessage_CONNECT:
			if _, err := util.PeerToPeerInfoV2(m.GetPeer()); err != nil {
				t.Fatalf("accepted a connect to no peer: %v", err)
			}
		default:
			t.Fatalf("accepted a hop message of type %v", m.GetType())
		}
	})
}
