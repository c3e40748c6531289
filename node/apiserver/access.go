package apiserver

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/e31network/e31/node/api"
)

// Access is who may use an API served on TCP, and the dashboard: whoever
// holds the token (api.TokenFile) may do all the API does; a browser that
// opened a one-time link (e31 ui, POST /v1/ui/link) holds a cookie that
// lets it read, which is all the dashboard does. One Access is shared by
// the API's listener and the dashboard's (ListenUI), so that a link made
// on one opens the other.
//
// A web page the user visits can make the browser send requests to any
// loopback port, and nothing but the token tells such a request from the
// user's own: a TCP port, unlike the unix socket, does not say who
// connects.
type Access struct {
	// Immutable after NewAccess.
	token []byte
	// session is the dashboard cookie's value: derived from the token,
	// so that it lasts across restarts as the token does, and changes
	// with it, without being it (the cookie only reads).
	session []byte
	now     func() time.Time

	mu sync.Mutex // state lock: guards links
	// links are the one-time codes made and not yet used, with when each
	// expires.
	links map[string]time.Time
}

// Bounds on one-time links: a link is for the person who just asked for
// it, so it lasts minutes, and only a few are open at once.
const (
	linkLife  = 2 * time.Minute
	maxLinks  = 64
	minToken  = 32 // characters: a shorter token in a file is refused
	tokenSize = 32 // random bytes of a token this package makes
)

// NewAccess returns the Access of token.
func NewAccess(token string) *Access {
	mac := hmac.New(sha256.New, []byte(token))
	mac.Write([]byte("e31 dashboard session"))
	return &Access{
		token:   []byte(token),
		session: []byte(hex.EncodeToString(mac.Sum(nil))),
		now:     time.Now,
		links:   make(map[string]time.Time),
	}
}

// LoadAccess returns the Access of the token in the file at path
// (LoadOrCreateToken).
func LoadAccess(path string) (*Access, error) {
	tok, err := LoadOrCreateToken(path)
	if err != nil {
		return nil, err
	}
	return NewAccess(tok), nil
}

// LoadOrCreateToken returns the token kept in the file at path, making
// the file (0600, 32 random bytes in hex) where there is none. The token
// is kept across restarts, so that a client given it once goes on
// working. A file that other users may read or write is refused, not
// fixed: the token in it may already have been read, and only a new one
// (remove the file) would help.
func LoadOrCreateToken(path string) (string, error) {
	st, err := os.Stat(path)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return createToken(path)
	case err != nil:
		return "", fmt.Errorf("API token: %w", err)
	case !st.Mode().IsRegular():
		return "", fmt.Errorf("API token %s: not a regular file", path)
	case st.Mode().Perm()&0o007 != 0:
		return "", fmt.Errorf("API token %s: other users may read or change it (mode %04o): remove it, and e31d makes another, 0600, at its next start", path, st.Mode().Perm())
	}
	tok, err := api.ReadToken(path)
	if err != nil {
		return "", err
	}
	if len(tok) < minToken || strings.ContainsFunc(tok, func(r rune) bool { return r <= ' ' || r > '~' }) {
		return "", fmt.Errorf("API token %s: want at least %d printable characters, without spaces", path, minToken)
	}
	return tok, nil
}

// createToken writes a new token at path, whole or not at all: written to
// a file beside it and renamed into place, so that a crash leaves no
// empty token behind that every later start would refuse.
func createToken(path string) (string, error) {
	b := make([]byte, tokenSize)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("API token: %w", err)
	}
	tok := hex.EncodeToString(b)
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+"-")
	if err != nil {
		return "", fmt.Errorf("API token: %w", err)
	}
	tmp := f.Name()
	defer os.Remove(tmp) // gone once renamed
	// CreateTemp makes the file 0600 already; the chmod says so here.
	err = f.Chmod(0o600)
	if err == nil {
		_, err = f.WriteString(tok + "\n")
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		return "", fmt.Errorf("API token %s: %w", path, err)
	}
	return tok, nil
}

// grant is what a request's credentials allow.
type grant int

const (
	grantNone grant = iota
	// grantRead: the dashboard's cookie, which reads.
	grantRead
	// grantAll: the token.
	grantAll
)

// grantOf is what r's credentials allow: its bearer token, else its
// dashboard cookie (named cookie). Both are compared in constant time.
func (a *Access) grantOf(r *http.Request, cookie string) grant {
	if tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); ok {
		if subtle.ConstantTimeCompare([]byte(strings.TrimSpace(tok)), a.token) == 1 {
			return grantAll
		}
		return grantNone
	}
	if c, err := r.Cookie(cookie); err == nil && subtle.ConstantTimeCompare([]byte(c.Value), a.session) == 1 {
		return grantRead
	}
	return grantNone
}

// link makes a one-time code, good until the time it returns.
func (a *Access) link() (string, time.Time, error) {
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		return "", time.Time{}, err
	}
	code := hex.EncodeToString(b)
	now := a.now()
	exp := now.Add(linkLife)
	a.mu.Lock()
	defer a.mu.Unlock()
	for c, until := range a.links {
		if !now.Before(until) {
			delete(a.links, c)
		}
	}
	if len(a.links) >= maxLinks {
		// The one that expires first goes: links are asked for one at
		// a time by people, so this is an old one nobody opened.
		var first string
		for c, until := range a.links {
			if first == "" || until.Before(a.links[first]) {
				first = c
			}
		}
		delete(a.links, first)
	}
	a.links[code] = exp
	return code, exp, nil
}

// redeem uses up a one-time code, and reports whether it was good.
func (a *Access) redeem(code string) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	until, ok := a.links[code]
	if !ok {
		return false
	}
	delete(a.links, code)
	return a.now().Before(until)
}
