package submitter

import (
	"errors"
	"fmt"
)

// Errors the API maps to statuses (node/apiserver).
var (
	// ErrNotFound: no such job on this node.
	ErrNotFound = errors.New("not found")
	// ErrInvalid: the request itself is wrong (a bad declaration, an
	// ambiguous ID prefix); retrying it as is cannot succeed.
	ErrInvalid = errors.New("invalid request")
	// ErrConflict: the request does not fit the job's state (withdrawing a
	// released job, fetching an output not there yet).
	ErrConflict = errors.New("conflict with the job's state")
)

// invalid marks err as the caller's mistake, keeping its text.
func invalid(err error) error { return fmt.Errorf("%w%w", err, errMark{ErrInvalid}) }

// conflict marks err as a conflict with the job's state.
func conflict(err error) error { return fmt.Errorf("%w%w", err, errMark{ErrConflict}) }

// errMark adds a sentinel to an error's chain without adding to its text.
type errMark struct{ err error }

func (m errMark) Error() string { return "" }
func (m errMark) Unwrap() error { return m.err }
