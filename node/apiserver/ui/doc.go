// Package ui is the daemon's dashboard: one read-only page, embedded in the
// binary, that a browser on the same machine opens at the local API's
// address (or at e31d --ui for a daemon whose API is a unix socket). It
// shows the network (providers, their GPUs free or held, when each was last
// heard from, and those lost lately as lost), this node's jobs with their
// five-step timelines and why the queued ones wait, an array's tasks
// split into completed, failed, withdrawn, running and queued with its
// failed indices, a job's log as it is written, receipts and usage, and
// plots of GPU-hours held by outcome, queue length and wait time.
//
// The page is HTML, CSS and plain JavaScript with no external asset, so it
// works offline; it reads the same JSON endpoints the e31 command uses
// (/v1/id, /v1/nodes?lost=1, /v1/jobs, /v1/jobs/{id}/logs, /v1/receipts,
// /v1/usage) every two seconds and computes the plots itself, so the API
// gained no endpoint for it. The daemon serves index.html with the answers
// of the first reads in a JSON data block (package apiserver, dashboard.go),
// so that the first paint has data. The jobs table filters by state and by
// name or ID, pages 50 at a time (both kept in the location hash), and lists
// a resumed job's attempts; peer IDs are shown short, in full on hover. It only reads: it sends no request that
// changes anything, and every text from the network is set as text, never
// parsed as HTML.
package ui
