package main

import (
	"fmt"
	"net"
	"os"
	"strings"
)

// notifier tells systemd of the daemon's state (sd_notify: READY=1 once the
// API answers, STOPPING=1 on SIGTERM) for a unit of Type=notify.
//
// It takes the socket out of the environment when it is made, at start:
// runc acts on NOTIFY_SOCKET (it binds the socket into the container and
// relays the container's messages), so the sandbox runtime, which e31d
// starts with its own environment, must never see it. That is also why
// this is a few lines of our own rather than go-systemd's SdNotify, which
// reads the variable again on every call.
type notifier struct {
	addr *net.UnixAddr // nil: not started by systemd with a notify socket
}

// takeNotifySocket reads NOTIFY_SOCKET and removes it from the
// environment. Only unix datagram sockets are supported (a path, or an
// abstract name starting with '@'), which is what systemd gives a service.
func takeNotifySocket() (notifier, error) {
	path, ok := os.LookupEnv("NOTIFY_SOCKET")
	if !ok {
		return notifier{}, nil
	}
	os.Unsetenv("NOTIFY_SOCKET")
	if !strings.HasPrefix(path, "/") && !strings.HasPrefix(path, "@") {
		return notifier{}, fmt.Errorf("NOTIFY_SOCKET %q: only a unix socket path or an abstract name (@...) is supported", path)
	}
	return notifier{addr: &net.UnixAddr{Name: path, Net: "unixgram"}}, nil
}

// send writes one state message ("READY=1") as a datagram.
func (n notifier) send(state string) error {
	if n.addr == nil {
		return nil
	}
	conn, err := net.DialUnix("unixgram", nil, n.addr)
	if err != nil {
		return fmt.Errorf("sd_notify %s: %w", state, err)
	}
	defer conn.Close()
	if _, err := conn.Write([]byte(state)); err != nil {
		return fmt.Errorf("sd_notify %s: %w", state, err)
	}
	return nil
}
