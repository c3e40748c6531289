package market

import (
	"fmt"
	"strconv"
)

// FormatInstant writes ms since the Unix epoch as RFC 3339 in UTC
// ("2026-03-01T14:02:05Z", with ".250" when there are milliseconds). It
// exists because market does not import time, yet its reasons name instants
// that a person reads.
func FormatInstant(ms int64) string {
	secs := floorDiv(ms, 1000)
	frac := ms - secs*1000
	days := floorDiv(secs, 86400)
	sod := secs - days*86400
	y, mo, d := civil(days)
	s := fmt.Sprintf("%04d-%02d-%02dT%02d:%02d:%02d", y, mo, d, sod/3600, sod/60%60, sod%60)
	if frac != 0 {
		s += "." + strconv.FormatInt(1000+frac, 10)[1:]
	}
	return s + "Z"
}

func floorDiv(a, b int64) int64 {
	q := a / b
	if (a%b != 0) && ((a < 0) != (b < 0)) {
		q--
	}
	return q
}

// civil converts days since 1970-01-01 to a proleptic Gregorian date
// (Howard Hinnant's days_from_civil, inverted).
func civil(z int64) (y int64, m, d int) {
	z += 719468
	era := floorDiv(z, 146097)
	doe := z - era*146097
	yoe := (doe - doe/1460 + doe/36524 - doe/146096) / 365
	y = yoe + era*400
	doy := doe - (365*yoe + yoe/4 - yoe/100)
	mp := (5*doy + 2) / 153
	d = int(doy - (153*mp+2)/5 + 1)
	if mp < 10 {
		m = int(mp + 3)
	} else {
		m = int(mp - 9)
	}
	if m <= 2 {
		y++
	}
	return y, m, d
}
