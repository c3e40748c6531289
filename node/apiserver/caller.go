package apiserver

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os/user"
	"strconv"

	"golang.org/x/sys/unix"
)

// Caller is who made a request over the unix socket, as the kernel says:
// the uid and gid of the process that connected (SO_PEERCRED), taken when
// it connected. A request over TCP has none: it holds the token, which is
// as good as the daemon's own user.
type Caller struct {
	UID, GID uint32
	PID      int32
}

// PeerCred reads the credentials of a unix socket's peer; Config's default
// (peerCred) is the kernel's, tests put others in its place.
type PeerCred func(net.Conn) (Caller, error)

// kernelPeerCred asks the kernel who is at the other end of c.
func kernelPeerCred(c net.Conn) (Caller, error) {
	uc, ok := c.(*net.UnixConn)
	if !ok {
		return Caller{}, fmt.Errorf("peer credentials of a %T", c)
	}
	raw, err := uc.SyscallConn()
	if err != nil {
		return Caller{}, err
	}
	var cred *unix.Ucred
	var credErr error
	if err := raw.Control(func(fd uintptr) {
		cred, credErr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	}); err != nil {
		return Caller{}, err
	}
	if credErr != nil {
		return Caller{}, fmt.Errorf("SO_PEERCRED: %w", credErr)
	}
	return Caller{UID: cred.Uid, GID: cred.Gid, PID: cred.Pid}, nil
}

// callerKey is the context key of a connection's Caller, or of the error
// that kept the daemon from learning it.
type callerKey struct{}

type callerOf struct {
	c   Caller
	err error
}

// withCaller is the connection's context with its peer's credentials in
// it (http.Server.ConnContext).
func withCaller(ctx context.Context, c net.Conn, cred PeerCred) context.Context {
	who, err := cred(c)
	return context.WithValue(ctx, callerKey{}, callerOf{who, err})
}

// errNoCaller: the daemon could not learn who connected, and so touches
// no path for them.
var errNoCaller = errors.New("the daemon could not learn who connected to its socket")

// callerFrom is who made the request, where it came over the unix socket.
// ok is false over TCP; err is set where the kernel did not say.
func callerFrom(ctx context.Context) (c Caller, ok bool, err error) {
	v, ok := ctx.Value(callerKey{}).(callerOf)
	if !ok {
		return Caller{}, false, nil
	}
	if v.err != nil {
		return Caller{}, true, fmt.Errorf("%w: %w", errNoCaller, v.err)
	}
	return v.c, true, nil
}

// groups are the caller's groups: its gid and, where the user database
// knows its user, every group it is a member of. A caller unknown there
// has its gid alone, which can only refuse it more.
func (c Caller) groups() map[uint32]bool {
	out := map[uint32]bool{c.GID: true}
	u, err := user.LookupId(strconv.FormatUint(uint64(c.UID), 10))
	if err != nil {
		return out
	}
	ids, err := u.GroupIds()
	if err != nil {
		return out
	}
	for _, s := range ids {
		if g, err := strconv.ParseUint(s, 10, 32); err == nil {
			out[uint32(g)] = true
		}
	}
	return out
}
