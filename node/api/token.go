package api

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"
	"time"
)

// TokenFile is the file in the daemon's data dir that holds the token a
// TCP API (and the dashboard's listener) asks of every request, as
// "Authorization: Bearer TOKEN". The daemon makes it, 0600, at its first
// start and keeps it; whoever can read it can do all the API can, with
// the daemon's rights. The unix socket asks for none: its mode, and the
// caller's uid, which the daemon learns from the kernel, guard it.
const TokenFile = "api-token"

// ErrNoToken means a token file holds no token.
var ErrNoToken = errors.New("no API token in the file")

// ReadToken reads the token in a token file: its first line, without the
// space around it.
func ReadToken(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("API token: %w", err)
	}
	tok, _, _ := strings.Cut(string(b), "\n")
	tok = strings.TrimSpace(tok)
	if tok == "" {
		return "", fmt.Errorf("API token %s: %w", path, ErrNoToken)
	}
	return tok, nil
}

// UILink is a one-time link to the daemon's dashboard (POST /v1/ui/link):
// opened once before it expires, it sets the cookie that lets that browser
// read the dashboard, and leads there.
type UILink struct {
	URL     string    `json:"url"`
	Expires time.Time `json:"expires"`
}

// UILink asks the daemon for a one-time link to its dashboard (e31 ui).
func (c *Client) UILink(ctx context.Context) (UILink, error) {
	var out UILink
	return out, c.Do(ctx, http.MethodPost, "/v1/ui/link", nil, struct{}{}, &out)
}
