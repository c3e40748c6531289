package epoch

import (
	"fmt"
	"log/slog"
	"runtime/debug"
)

// PanicMatch is the where of a panic recovered from a pass, an epoch's or
// one between epochs: the label value of e31_panics_total. The pass is
// lost; the loop goes on with the next.
const PanicMatch = "match"

// recoverPanic, deferred, stops a panic in one pass: it is logged at error
// level with its stack and told to panicked. It must itself be the
// deferred call: recover stops a panic only there. A safety net for bugs,
// never a way to refuse a message: the tests fail on any "panic recovered"
// in a log.
func recoverPanic(log *slog.Logger, panicked func(where string), attrs ...any) {
	v := recover()
	if v == nil {
		return
	}
	attrs = append([]any{"where", PanicMatch, "panic", fmt.Sprint(v)}, attrs...)
	log.Error("panic recovered", append(attrs, "stack", string(debug.Stack()))...)
	if panicked != nil {
		panicked(PanicMatch)
	}
}
