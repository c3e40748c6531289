package p2p

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/record"
	"github.com/libp2p/go-libp2p/core/record/pb"
	"google.golang.org/protobuf/proto"
)

// MaxPayload is the largest signed envelope accepted from the network.
const MaxPayload = 64 << 10

// envelopeDomain separates E31 signatures from every other use of a peer key:
// a signature made here can never be replayed as, say, a libp2p peer record.
const envelopeDomain = "e31-network"

// messageCodec is the envelope's payload type.
var messageCodec = []byte("/e31/message/1")

// Sentinel errors of Open, so callers can count rejections by reason.
var (
	ErrOversized = errors.New("payload too large")
	ErrMalformed = errors.New("malformed payload")
	ErrUnsigned  = errors.New("payload not signed")
	ErrForged    = errors.New("forged payload")
	ErrStale     = errors.New("stale payload")
	ErrReplayed  = errors.New("replayed payload")
	// ErrUnwanted is a body validator's word for a payload valid in
	// itself that this peer will not take now (node/view's bounds would
	// refuse it): ignored and not passed on, and no one penalised.
	ErrUnwanted = errors.New("unwanted payload")
)

// Message is the signed content of every gossip payload and of every
// statement one party hands another as evidence.
type Message struct {
	// Kind says how to read Body ("offer", "declaration", ...).
	Kind string `json:"kind"`
	// Time is when the signer made the message, in Unix milliseconds.
	Time int64 `json:"time"`
	// Nonce makes every message unique, so that a replay is recognisable.
	Nonce uint64 `json:"nonce"`
	// Body is the kind-specific content.
	Body json.RawMessage `json:"body"`
}

func (m *Message) Domain() string { return envelopeDomain }
func (m *Message) Codec() []byte  { return messageCodec }

func (m *Message) MarshalRecord() ([]byte, error) { return json.Marshal(m) }

func (m *Message) UnmarshalRecord(data []byte) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(m); err != nil {
		return err
	}
	if dec.More() {
		return errors.New("trailing data after message")
	}
	if m.Kind == "" {
		return errors.New("message has no kind")
	}
	if len(m.Body) == 0 {
		return errors.New("message has no body")
	}
	return nil
}

// Signed is a verified envelope: who signed which message, and the exact
// bytes, which are the evidence.
type Signed struct {
	Signer  peer.ID
	Message Message
	Raw     []byte
}

// Hash is the SHA-256 of the envelope bytes; a job's ID is derived from it.
func (s Signed) Hash() [32]byte { return sha256.Sum256(s.Raw) }

// Time is the message's signing time.
func (s Signed) Time() time.Time { return time.UnixMilli(s.Message.Time) }

// Decode unmarshals the body strictly into v.
func (s Signed) Decode(v any) error {
	dec := json.NewDecoder(bytes.NewReader(s.Message.Body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("%w: %s body: %v", ErrMalformed, s.Message.Kind, err)
	}
	if dec.More() {
		return fmt.Errorf("%w: %s body: trailing data", ErrMalformed, s.Message.Kind)
	}
	return nil
}

// Seal signs a message of the given kind with sk.
func Seal(sk crypto.PrivKey, kind string, body any, now time.Time) (Signed, error) {
	b, err := json.Marshal(body)
	if err != nil {
		return Signed{}, fmt.Errorf("seal %s: %w", kind, err)
	}
	var nonce [8]byte
	if _, err := rand.Read(nonce[:]); err != nil {
		return Signed{}, fmt.Errorf("seal %s: %w", kind, err)
	}
	m := Message{Kind: kind, Time: now.UnixMilli(), Nonce: binary.BigEndian.Uint64(nonce[:]), Body: b}
	env, err := record.Seal(&m, sk)
	if err != nil {
		return Signed{}, fmt.Errorf("seal %s: %w", kind, err)
	}
	raw, err := env.Marshal()
	if err != nil {
		return Signed{}, fmt.Errorf("seal %s: %w", kind, err)
	}
	if len(raw) > MaxPayload {
		return Signed{}, fmt.Errorf("seal %s: %w (%d bytes, limit %d)", kind, ErrOversized, len(raw), MaxPayload)
	}
	id, err := peer.IDFromPrivateKey(sk)
	if err != nil {
		return Signed{}, fmt.Errorf("seal %s: %w", kind, err)
	}
	return Signed{Signer: id, Message: m, Raw: raw}, nil
}

// Open checks an envelope's size, structure and signature and returns what
// it says. It does not judge freshness or replay; see Checker. The envelope
// is libp2p's signed envelope (core/record), read here in one pass.
func Open(data []byte) (Signed, error) {
	if len(data) > MaxPayload {
		return Signed{}, fmt.Errorf("%w (%d bytes, limit %d)", ErrOversized, len(data), MaxPayload)
	}
	var raw pb.Envelope
	if err := proto.Unmarshal(data, &raw); err != nil {
		return Signed{}, fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	if raw.GetPublicKey() == nil || len(raw.GetSignature()) == 0 {
		return Signed{}, ErrUnsigned
	}
	pk, err := crypto.PublicKeyFromProto(raw.GetPublicKey())
	if err != nil {
		return Signed{}, fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	if !bytes.Equal(raw.GetPayloadType(), messageCodec) {
		return Signed{}, fmt.Errorf("%w: payload type %q", ErrMalformed, raw.GetPayloadType())
	}
	if !VerifySignature(pk, signedBytes(envelopeDomain, raw.GetPayloadType(), raw.GetPayload()), raw.GetSignature()) {
		return Signed{}, fmt.Errorf("%w: signature does not verify", ErrForged)
	}
	var m Message
	if err := m.UnmarshalRecord(raw.GetPayload()); err != nil {
		return Signed{}, fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	id, err := peer.IDFromPublicKey(pk)
	if err != nil {
		return Signed{}, fmt.Errorf("%w: signer key: %v", ErrMalformed, err)
	}
	return Signed{Signer: id, Message: m, Raw: data}, nil
}

// signedBytes are the bytes an envelope's signature covers, as libp2p's
// record package lays them out: the domain, the payload type and the
// payload, each after its length as an unsigned varint.
func signedBytes(domain string, payloadType, payload []byte) []byte {
	b := make([]byte, 0, len(domain)+len(payloadType)+len(payload)+3*binary.MaxVarintLen64)
	b = binary.AppendUvarint(b, uint64(len(domain)))
	b = append(b, domain...)
	b = binary.AppendUvarint(b, uint64(len(payloadType)))
	b = append(b, payloadType...)
	b = binary.AppendUvarint(b, uint64(len(payload)))
	return append(b, payload...)
}

// Reopen reads an envelope that Open has already accepted (a message the
// gossip validator passed, read again by the node) without verifying its
// signature a second time. It must never be given bytes from the network
// that no validator has seen.
func Reopen(data []byte) (Signed, error) {
	env, err := record.UnmarshalEnvelope(data)
	if err != nil {
		return Signed{}, fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	var m Message
	if err := m.UnmarshalRecord(env.RawPayload); err != nil {
		return Signed{}, fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	id, err := peer.IDFromPublicKey(env.PublicKey)
	if err != nil {
		return Signed{}, fmt.Errorf("%w: signer key: %v", ErrMalformed, err)
	}
	return Signed{Signer: id, Message: m, Raw: data}, nil
}
