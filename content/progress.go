package content

// Progress receives the progress of a long operation (import, export,
// fetch). It is a sink: the caller decides whether it becomes a bar, JSON
// lines or nothing. Calls come from the goroutine doing the work, in the
// order Start, Add..., Done; Done is called on failure too.
type Progress interface {
	// Start announces the total (bytes) and what is being done.
	Start(total int64, what string)
	// Add reports n more bytes done.
	Add(n int64)
	// Done says the operation ended, successfully or not.
	Done()
}

// The helpers below let every operation take a nil Progress.

func progressStart(p Progress, total int64, what string) {
	if p != nil {
		p.Start(total, what)
	}
}

func progressAdd(p Progress, n int64) {
	if p != nil && n != 0 {
		p.Add(n)
	}
}

func progressDone(p Progress) {
	if p != nil {
		p.Done()
	}
}
