// Package joblog reads a job's stdout or stderr from a place in it while the
// job may still be writing: the provider answers followers from the log file
// the sandbox writes (Read), the submitter keeps each follower's place
// (Cursor) and, once the run is over, reads the copy that came back with the
// output the same way.
//
// The sandbox keeps only the tail of a long log: when the file reaches twice
// its cap, its last cap bytes move to the front (exec's tailFile). Offsets
// then shift under a reader, so a reader's place is an offset plus the last
// bytes it read (the anchor). Read checks the anchor where the reader left
// off; when it is not there, the file was trimmed, and Read finds the anchor
// again, or, when the bytes after it are gone too, restarts at the front of
// what was kept and says that bytes were dropped, so the reader can mark the
// gap. Nothing is buffered for a reader: a slow one falls behind in the
// file, never in memory, and the job never waits for it.
package joblog
