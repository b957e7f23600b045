package strictjson

import (
	"fmt"
	"strings"
)

// hujsonError splits an error of tailscale/hujson's Parse into the line,
// column and message it carries. hujson offers the position only as text
// ("hujson: line L, column C: MESSAGE"); this is the one place that reads
// it, and TestHujsonErrorText pins the upstream format. When the text has
// another shape, line and column are 0 and msg is the whole text.
func hujsonError(err error) (line, column int, msg string) {
	msg = err.Error()
	var l, c int
	if _, serr := fmt.Sscanf(msg, "hujson: line %d, column %d:", &l, &c); serr != nil {
		return 0, 0, msg
	}
	if i := strings.Index(msg, ": "); i >= 0 {
		if j := strings.Index(msg[i+2:], ": "); j >= 0 {
			msg = msg[i+2+j+2:]
		}
	}
	return l, c, msg
}
