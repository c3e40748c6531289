package api

// Error is the body of every failed request.
type Error struct {
	Error string `json:"error"`
}
