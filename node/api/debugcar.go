package api

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
)

// DebugCAR is the answer to POST /v1/debug/car: the roots of the CAR the
// daemon stored, each pinned as it is.
type DebugCAR struct {
	Roots []string `json:"roots"`
}

// CARType is the body type of POST /v1/debug/car, the one route that
// takes a body other than JSON.
const CARType = "application/vnd.ipld.car"

// PutCAR posts a CAR (v1 or v2) to POST /v1/debug/car, which only a daemon
// built with the byzantine tag and started with --misbehave raw-content
// serves: every block is stored as it is (each must hash to its CID) and
// every root pinned, complete or not. It is how tests play a hostile
// submitter that puts arbitrary DAGs on the network.
func (c *Client) PutCAR(ctx context.Context, car io.Reader) (DebugCAR, error) {
	req, err := c.newRequest(ctx, http.MethodPost, c.base+"/v1/debug/car", car, CARType)
	if err != nil {
		return DebugCAR{}, err
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return DebugCAR{}, c.unreachable(ctx, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return DebugCAR{}, err
	}
	if resp.StatusCode >= 300 {
		var e Error
		if json.Unmarshal(b, &e) == nil && e.Error != "" {
			return DebugCAR{}, &StatusError{Code: resp.StatusCode, Msg: e.Error}
		}
		return DebugCAR{}, &StatusError{Code: resp.StatusCode, Msg: string(b)}
	}
	var out DebugCAR
	if err := json.Unmarshal(b, &out); err != nil {
		return DebugCAR{}, fmt.Errorf("decode reply of POST /v1/debug/car: %w", err)
	}
	return out, nil
}
