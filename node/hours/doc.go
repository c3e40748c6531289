// Package hours reads and answers a contributor's contribution hours: the
// times of the week a node lends its GPUs to the network, because its owner
// uses the machine the rest of the time.
//
// A contributor writes them once, as the daemon's --hours flag:
//
//	e31d --hours "Mon-Fri 19:00-07:30; Sat,Sun 00:00-24:00"
//
// Parse turns that text into a Schedule, or into an error that names the
// window at fault and says what is wanted (Parse documents the syntax).
// A Schedule then answers, for any instant, the three questions the node
// asks of it:
//
//   - Open(t): is t inside the hours? Outside them the node's offer says
//     Closed (market.Offer), and Match gives it no work.
//   - Closes(t): when does the stretch of open time that t is in end? The
//     offer states it as OpenUntil, so Match places there jobs whose
//     declared limit ends by then, and jobs that checkpoint to be cut at
//     the close (market/window.go), and the node knows when to drain.
//   - Opens(t): when does the next window open? The node sleeps until then.
//
// A Schedule is a week of minutes, each open or closed, so windows that
// overlap or touch make one stretch: with the flag above, the node is open
// from Friday 19:00 without a break to Monday 00:00. String writes the
// canonical form of that week, which Parse reads back to the same Schedule.
//
// # Time zones and daylight saving
//
// Hours are read on the wall clock of the instant asked about: the node
// passes times in time.Local, so "19:00" is seven in the evening where the
// machine is, all year round. Instants are found from wall-clock times
// within each span of one UTC offset and across the transitions between
// them, never by adding 24 hours, which is not a day on the day the clocks
// change. On that day a window keeps to the clock: in spring, one across
// the skipped hour is an hour shorter, and a window that would start or end
// inside it starts or ends when the clock jumps past it; in autumn, one
// across the repeated hour is an hour longer, and the repeated hour is
// open or closed both times as its wall-clock minutes say, so a window
// that ends inside it closes, opens again when the clock goes back, and
// closes for good when the clock reaches its end a second time. A job is
// never placed past a close: the offer states the first one.
package hours
