package p2p

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"runtime/debug"
	"time"

	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/protocol"
	"github.com/libp2p/go-msgio"
)

// MaxFrame is the largest request or reply on a direct stream.
const MaxFrame = 1 << 20

// DefaultCallTimeout bounds a request/response exchange whose context has no
// deadline of its own.
const DefaultCallTimeout = 30 * time.Second

// RemoteError is an error that the other party reported. Code, when set, is
// the refusal's machine-readable reason (see Refusal): callers branch on it,
// never on Msg.
type RemoteError struct {
	Code string
	Msg  string
}

func (e *RemoteError) Error() string { return "peer says: " + e.Msg }

// Refusal is an error a handler returns to refuse a request with a code the
// caller can branch on. Its text goes along for people.
type Refusal struct {
	Code string
	Err  error
}

func (e *Refusal) Error() string { return e.Err.Error() }
func (e *Refusal) Unwrap() error { return e.Err }

// Refuse wraps err with a refusal code.
func Refuse(code string, err error) error { return &Refusal{Code: code, Err: err} }

// RefusalCode returns the code of a refusal a peer sent (a *RemoteError) or
// a handler returned (a *Refusal), or "".
func RefusalCode(err error) string {
	var re *RemoteError
	if errors.As(err, &re) {
		return re.Code
	}
	var rf *Refusal
	if errors.As(err, &rf) {
		return rf.Code
	}
	return ""
}

type reply struct {
	Error string          `json:"error,omitempty"`
	Code  string          `json:"code,omitempty"`
	Body  json.RawMessage `json:"body,omitempty"`
}

// WriteFrame writes v as one varint-length-prefixed JSON frame.
func WriteFrame(w io.Writer, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	if len(b) > MaxFrame {
		return fmt.Errorf("frame of %d bytes over the %d limit", len(b), MaxFrame)
	}
	return msgio.NewVarintWriter(w).WriteMsg(b)
}

// ReadFrame reads one frame written by WriteFrame and decodes it strictly.
func ReadFrame(r io.Reader, v any) error {
	b, err := msgio.NewVarintReaderSize(r, MaxFrame).ReadMsg()
	if err != nil {
		return err
	}
	return DecodeStrict(b, v)
}

// DecodeStrict decodes one JSON value, refusing unknown fields and trailing
// data: input from the network that a newer or hostile peer padded is
// refused rather than half-read.
func DecodeStrict(b []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	if dec.More() {
		return fmt.Errorf("%w: trailing data", ErrMalformed)
	}
	return nil
}

// Call sends req to p on protocol proto and decodes the reply into resp
// (which may be nil). The exchange is bounded by ctx, or DefaultCallTimeout.
// It uses a relayed connection when no direct one exists.
func Call(ctx context.Context, h host.Host, p peer.ID, proto protocol.ID, req, resp any) error {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, DefaultCallTimeout)
		defer cancel()
	}
	// A request and its reply are small, so they may cross a relay whose
	// limits are meant for control traffic; bulk transfers never use Call.
	s, err := h.NewStream(network.WithAllowLimitedConn(ctx, "e31 control"), p, proto)
	if err != nil {
		return fmt.Errorf("open %s stream to %s: %w", proto, p, err)
	}
	if dl, ok := ctx.Deadline(); ok {
		_ = s.SetDeadline(dl)
	}
	if err := WriteFrame(s, req); err != nil {
		s.Reset()
		return fmt.Errorf("send %s request: %w", proto, err)
	}
	if err := s.CloseWrite(); err != nil {
		s.Reset()
		return fmt.Errorf("send %s request: %w", proto, err)
	}
	var rep reply
	if err := ReadFrame(s, &rep); err != nil {
		s.Reset()
		return fmt.Errorf("read %s reply from %s: %w", proto, p, err)
	}
	s.Close()
	if rep.Error != "" {
		return &RemoteError{Code: rep.Code, Msg: rep.Error}
	}
	if resp == nil {
		return nil
	}
	return DecodeStrict(rep.Body, resp)
}

// Handler answers one request from a peer. The request is raw JSON; use
// DecodeStrict on it. A returned error is sent to the caller as its text.
type Handler func(ctx context.Context, from peer.ID, req json.RawMessage) (any, error)

// CodeInternal is the refusal code of a request the serving side failed
// for a fault of its own (the handler panicked, or its reply did not
// encode), not for anything in the request.
const CodeInternal = "internal"

// PanicStream is the where of a panic that Serve recovered from a handler
// (see OnPanic).
const PanicStream = "stream"

// ServeOption configures Serve.
type ServeOption func(*serveOptions)

type serveOptions struct {
	panicked func(where string)
}

// OnPanic has Serve tell fn of every panic it recovered from the handler,
// with where PanicStream: the node counts them. Without it a recovered
// panic is only logged.
func OnPanic(fn func(where string)) ServeOption {
	return func(o *serveOptions) { o.panicked = fn }
}

// Serve installs fn as the handler of proto on h. Each request is bounded by
// timeout.
//
// A panic in fn fails that one request, as net/http does: it is logged at
// error level with its stack, the caller gets "internal error" with
// CodeInternal, and the host goes on serving. libp2p runs each stream's
// handler in a goroutine of its own without recovering, so without this
// one request from a peer that finds a bug would end the daemon.
func Serve(ctx context.Context, h host.Host, proto protocol.ID, timeout time.Duration, log *slog.Logger, fn Handler, opts ...ServeOption) {
	var o serveOptions
	for _, opt := range opts {
		opt(&o)
	}
	h.SetStreamHandler(proto, func(s network.Stream) {
		defer s.Close()
		_ = s.SetDeadline(time.Now().Add(timeout))
		b, err := msgio.NewVarintReaderSize(s, MaxFrame).ReadMsg()
		if err != nil {
			log.Debug("bad request frame", "proto", proto, "peer", s.Conn().RemotePeer(), "err", err)
			s.Reset()
			return
		}
		rctx, cancel := context.WithTimeout(ctx, timeout)
		defer cancel()
		rep := answer(rctx, fn, s.Conn().RemotePeer(), json.RawMessage(b), proto, log, o.panicked)
		if err := WriteFrame(s, rep); err != nil {
			s.Reset()
		}
	})
}

// internalError is the reply to a request the serving side failed for a
// fault of its own; the peer learns nothing of the fault but that it
// happened.
var internalError = reply{Error: "internal error", Code: CodeInternal}

// answer runs fn on one request and makes its reply. Everything that runs
// the handler's code is inside: fn, and the encoding of its reply and
// error, whose methods are the handler's too. A panic in any becomes
// internalError, logged with its stack and told to panicked (if set).
func answer(ctx context.Context, fn Handler, from peer.ID, req json.RawMessage, proto protocol.ID, log *slog.Logger, panicked func(string)) (rep reply) {
	defer func() {
		v := recover()
		if v == nil {
			return
		}
		log.Error("panic recovered", "where", PanicStream, "panic", fmt.Sprint(v), "proto", proto, "peer", from, "stack", string(debug.Stack()))
		if panicked != nil {
			panicked(PanicStream)
		}
		rep = internalError
	}()
	out, err := fn(ctx, from, req)
	if err != nil {
		return reply{Error: err.Error(), Code: RefusalCode(err)}
	}
	if out == nil {
		return reply{}
	}
	body, err := json.Marshal(out)
	if err != nil {
		return internalError
	}
	return reply{Body: body}
}
