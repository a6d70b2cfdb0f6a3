package broker

import (
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"
)

// serverLog is the embedded NATS server's log as the edge keeps it: nothing but the clients
// it turns away (wrong, revoked or unknown credentials, no credentials, a failed TLS
// handshake), each counted through refused and logged once a minute per reason and client
// address, so that an SRE sees a misconfigured worker from the edge's side.
type serverLog struct {
	log     *slog.Logger
	refused func(reason string)

	mu   sync.Mutex
	last map[string]time.Time
}

func (l *serverLog) Noticef(string, ...any) {}
func (l *serverLog) Debugf(string, ...any)  {}
func (l *serverLog) Tracef(string, ...any)  {}
func (l *serverLog) Warnf(format string, v ...any) {
	l.check(fmt.Sprintf(format, v...))
}
func (l *serverLog) Errorf(format string, v ...any) {
	l.check(fmt.Sprintf(format, v...))
}
func (l *serverLog) Fatalf(format string, v ...any) {
	l.log.Error("embedded NATS: " + fmt.Sprintf(format, v...))
}

// refusalReasons are the server's words for a client it turns away, and the reason label.
var refusalReasons = []struct{ words, reason string }{
	{"authentication error", "credentials"}, // none, wrong, revoked, expired or another authority's
	{"authorization violation", "credentials"},
	{"tls handshake error", "tls"}, // clear text to a TLS port, an unknown CA, no client certificate
	{"client certificate", "tls"},
}

func (l *serverLog) check(line string) {
	low := strings.ToLower(line)
	reason := ""
	for _, r := range refusalReasons {
		if strings.Contains(low, r.words) {
			reason = r.reason
			break
		}
	}
	if reason == "" {
		return
	}
	if l.refused != nil {
		l.refused(reason)
	}
	addr, _, _ := strings.Cut(line, " - ") // the server writes each client's lines "<ip:port> - cid:N - …"
	host := addr
	if i := strings.LastIndex(addr, ":"); i > 0 {
		host = addr[:i]
	}
	key := reason + " " + host
	now := time.Now()
	l.mu.Lock()
	if l.last == nil {
		l.last = make(map[string]time.Time)
	}
	if now.Sub(l.last[key]) < time.Minute {
		l.mu.Unlock()
		return
	}
	if len(l.last) > 10_000 {
		l.last = make(map[string]time.Time)
	}
	l.last[key] = now
	l.mu.Unlock()
	l.log.Warn("embedded NATS refused a client (one line a minute per reason and address; see spookat_nats_refused_total)",
		"reason", reason, "client", host, "detail", line)
}
