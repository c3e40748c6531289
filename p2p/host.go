package p2p

import (
	"fmt"

	"github.com/libp2p/go-libp2p"
	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/host"
	libp2pquic "github.com/libp2p/go-libp2p/p2p/transport/quic"
	"github.com/libp2p/go-libp2p/p2p/transport/tcp"
	ma "github.com/multiformats/go-multiaddr"
)

// DefaultListen is used when no listen address is given: a free TCP port and
// a free QUIC port on every interface.
var DefaultListen = []string{"/ip4/0.0.0.0/tcp/0", "/ip4/0.0.0.0/udp/0/quic-v1"}

// HostConfig configures NewHost.
type HostConfig struct {
	// Key is the node's identity; see LoadOrCreateIdentity.
	Key crypto.PrivKey
	// Listen holds multiaddrs to listen on (TCP and QUIC). Empty means
	// DefaultListen.
	Listen []string
	// UserAgent is sent in identify; empty means "e31".
	UserAgent string
	// Gater, if set, decides which peers may connect.
	Gater *Gater
	// Reachability turns on what lets a host behind a NAT be reached: AutoNAT,
	// port mapping, hole punching, relays. The zero value keeps all of it
	// off, as tests and the testnet need.
	Reachability Reachability
}

// NewHost builds a libp2p host that speaks only TCP and QUIC. Relays, NAT port
// mapping and hole punching stay off unless cfg.Reachability turns them on: a
// node in a test or a testnet must not send a packet beyond the addresses it
// was given. Metrics are off because libp2p would register them in the
// process-wide Prometheus registry; the node exports its own.
func NewHost(cfg HostConfig) (host.Host, error) {
	if cfg.Key == nil {
		return nil, fmt.Errorf("new host: no identity key")
	}
	listen := cfg.Listen
	if len(listen) == 0 {
		listen = DefaultListen
	}
	for _, a := range listen {
		if _, err := ma.NewMultiaddr(a); err != nil {
			return nil, fmt.Errorf("listen address %q: %w", a, err)
		}
	}
	ua := cfg.UserAgent
	if ua == "" {
		ua = "e31"
	}
	opts := []libp2p.Option{
		libp2p.Identity(cfg.Key),
		libp2p.ListenAddrStrings(listen...),
		libp2p.Transport(tcp.NewTCPTransport),
		libp2p.Transport(libp2pquic.NewTransport),
		libp2p.DisableMetrics(),
		libp2p.UserAgent(ua),
	}
	reach, err := cfg.Reachability.options()
	if err != nil {
		return nil, fmt.Errorf("new host: %w", err)
	}
	opts = append(opts, reach...)
	if cfg.Gater != nil {
		opts = append(opts, libp2p.ConnectionGater(cfg.Gater))
	}
	h, err := libp2p.New(opts...)
	if err != nil {
		return nil, fmt.Errorf("start libp2p host: %w", err)
	}
	if cfg.Reachability.RelayService {
		if err := serveRelay(h, cfg.Reachability.RelayLimits); err != nil {
			_ = h.Close()
			return nil, fmt.Errorf("new host: %w", err)
		}
	}
	return h, nil
}
