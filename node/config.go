package node

import (
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"time"
)

// Config is what a node is started with. The zero value of every field but
// DataDir has a documented default, applied by withDefaults.
type Config struct {
	// DataDir holds the identity key, the stores and the API socket.
	DataDir string
	// Listen holds libp2p multiaddrs; default p2p.DefaultListen.
	Listen []string
	// Bootstrap holds multiaddrs (with /p2p/ID) of peers to stay connected to.
	Bootstrap []string
	// API is the local API address: a unix socket path or a loopback
	// host:port. Default DataDir/e31.sock.
	API string
	// SimGPUs, when set, replaces GPU discovery with simulated GPUs
	// ("4xH100:80GiB").
	SimGPUs string
	// Network names the E31 network; default "e31".
	Network string
	// MDNS turns on LAN discovery. Off by default: it multicasts on every
	// interface.
	MDNS bool
	// Heartbeat is how often a provider re-publishes its offer; a provider
	// silent for three heartbeats leaves every view. Default 10s.
	Heartbeat time.Duration
	// Log receives the node's structured logs; default discards.
	Log *slog.Logger
}

// DefaultNetwork is the network joined when none is named.
const DefaultNetwork = "e31"

func (c Config) withDefaults() (Config, error) {
	if c.DataDir == "" {
		return c, errors.New("no data dir")
	}
	abs, err := filepath.Abs(c.DataDir)
	if err != nil {
		return c, fmt.Errorf("data dir: %w", err)
	}
	c.DataDir = abs
	if c.API == "" {
		c.API = filepath.Join(c.DataDir, "e31.sock")
	}
	if c.Network == "" {
		c.Network = DefaultNetwork
	}
	if c.Heartbeat == 0 {
		c.Heartbeat = 10 * time.Second
	}
	if c.Heartbeat < 50*time.Millisecond {
		return c, fmt.Errorf("heartbeat %s is too short (minimum 50ms)", c.Heartbeat)
	}
	if c.Log == nil {
		c.Log = slog.New(slog.DiscardHandler)
	}
	return c, nil
}
