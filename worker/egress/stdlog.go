package egress

import (
	stdlog "log"
	"log/slog"
	"strings"
)

// StdLog sends what the standard library logs on its own (net/http does, about connections to
// delivery targets) to l at Warn, a record a line, instead of raw lines on stderr beside the
// structured ones. net/http's line about an answer that came unasked quotes the target's first
// bytes: outside bytes (a banner, whatever a service says first) that do not belong in our
// logs, so that line is replaced by a sentence without them.
func StdLog(l *slog.Logger) {
	stdlog.SetFlags(0)
	stdlog.SetOutput(stdWriter{l})
}

type stdWriter struct{ l *slog.Logger }

const unsolicited = "Unsolicited response received on idle HTTP channel"

func (w stdWriter) Write(p []byte) (int, error) {
	line := strings.TrimRight(string(p), "\n")
	if strings.HasPrefix(line, unsolicited) {
		line = "a delivery target answered before it was asked (it does not speak HTTP); what it sent is not logged"
	}
	w.l.Warn(line, "from", "go standard library")
	return len(p), nil
}
