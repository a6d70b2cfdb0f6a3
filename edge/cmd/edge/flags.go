package main

import (
	"errors"
	"flag"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// Checks of serve's flag values after parsing, by flag name, so a flag added to serve
// without a rule here is simply not checked. A value the flag package accepts can still mean
// nothing (a port without a host, a negative queue, a log level no one knows): each answer
// names the flag and gives a value that works.

// rule checks a flag's value (as flag.Value.String gives it) and says what is wanted.
type rule func(v string) (want string, ok bool)

func hostPort(v string) (string, bool) {
	const want = "host:port, e.g. :8080 (every address) or 127.0.0.1:8080"
	host, port, err := net.SplitHostPort(v)
	if err != nil {
		return want, false
	}
	n, err := strconv.Atoi(port)
	if err != nil || n < 0 || n > 65535 || strings.ContainsAny(host, " /") {
		return want, false
	}
	return "", true
}

func optional(r rule) rule {
	return func(v string) (string, bool) {
		if v == "" {
			return "", true
		}
		want, ok := r(v)
		return want + " (or empty: off)", ok
	}
}

func httpURL(v string) (string, bool) {
	u, err := url.Parse(v)
	ok := err == nil && (u.Scheme == "http" || u.Scheme == "https") && u.Host != "" && u.RawQuery == "" && u.Fragment == ""
	return "an absolute http(s) URL, e.g. https://chat.shop.example", ok
}

func oneOf(values ...string) rule {
	return func(v string) (string, bool) {
		for _, w := range values {
			if v == w {
				return "", true
			}
		}
		return strings.Join(values[:len(values)-1], ", ") + " or " + values[len(values)-1], false
	}
}

func intIn(lo, hi int) rule {
	return func(v string) (string, bool) {
		n, err := strconv.Atoi(v)
		if hi == 0 {
			return fmt.Sprintf("a whole number of at least %d", lo), err == nil && n >= lo
		}
		return fmt.Sprintf("a whole number from %d to %d", lo, hi), err == nil && n >= lo && n <= hi
	}
}

func nonNegative(v string) (string, bool) {
	f, err := strconv.ParseFloat(v, 64)
	return "a number of at least 0 (0: no limit)", err == nil && f >= 0
}

func positiveDuration(v string) (string, bool) {
	d, err := time.ParseDuration(v)
	return "a duration above zero, e.g. 30s or 2m", err == nil && d > 0
}

var serveRules = map[string]rule{
	"addr":         hostPort,
	"nats-listen":  hostPort,
	"nats-monitor": optional(hostPort),
	"pprof":        optional(hostPort),
	"public-url":   optional(httpURL),
	"log-level":    oneOf("debug", "info", "warn", "error"),
	"sync":         oneOf("normal", "full"),
	"worker":       oneOf("inproc", "none"),
	"nats-replicas": func(v string) (string, bool) {
		want, ok := intIn(1, 5)(v)
		return want + " (3 on a NATS cluster)", ok
	},
	"write-queue":      intIn(1, 0),
	"request-timeout":  positiveDuration,
	"opening-per-addr": intIn(-1, 0),
	"wal-max-pages":    intIn(64, 0),
	// brakes
	"conn-msg-rate":   nonNegative,
	"conn-msg-burst":  nonNegative,
	"ip-socket-rate":  nonNegative,
	"ip-socket-burst": nonNegative,
	"ip-conv-rate":    nonNegative,
	"ip-conv-burst":   nonNegative,
	"site-msg-rate":   nonNegative,
	"site-msg-burst":  nonNegative,
	"flood-threshold": func(v string) (string, bool) {
		want, ok := intIn(0, 0)(v)
		return want + " (0: off)", ok
	},
	"flood-divisor":   intIn(2, 0),
	"flood-max-level": intIn(1, 0),
	// the in-process worker's and the job queue's
	"chat-inflight":    intIn(1, 0),
	"webhook-inflight": intIn(1, 0),
	"email-inflight":   intIn(1, 0),
	"max-attempts":     intIn(1, 0),
	"slack-merge":      intIn(0, 0),
	"smtp-port":        intIn(1, 65535),
	"smtp-tls":         oneOf("none", "starttls", "mandatory", "tls"),
	"retry-base":       positiveDuration,
	"retry-max":        positiveDuration,
	"slack-pace":       positiveDuration,
	"webhook-timeout":  positiveDuration,
	"pull-expiry":      positiveDuration,
	"stop-timeout":     positiveDuration,
	"ack-wait":         positiveDuration,
	"pinned-ttl":       positiveDuration,
	"member-ttl":       positiveDuration,
}

// ratePairs are rate flags whose burst must hold at least one whole event while the rate is
// on: a smaller bucket refuses everything.
var ratePairs = [][2]string{
	{"conn-msg-rate", "conn-msg-burst"}, {"ip-socket-rate", "ip-socket-burst"},
	{"ip-conv-rate", "ip-conv-burst"}, {"site-msg-rate", "site-msg-burst"},
}

// validate checks fs's values by serveRules (in flag name order) and the pairs that depend
// on each other; the first mistake is the answer.
func validate(fs *flag.FlagSet) error {
	var err error
	fs.VisitAll(func(f *flag.Flag) {
		r, ok := serveRules[f.Name]
		if err != nil || !ok {
			return
		}
		v := f.Value.String()
		want, ok := r(v)
		if ok {
			return
		}
		example := ""
		if _, ok := r(f.DefValue); ok && f.DefValue != "" {
			example = fmt.Sprintf(" (the default is -%s %s)", f.Name, f.DefValue)
		}
		err = fmt.Errorf("-%s %q: want %s%s", f.Name, v, want, example)
		if f.Name == "addr" || f.Name == "nats-listen" || f.Name == "nats-monitor" || f.Name == "pprof" {
			if _, e := strconv.Atoi(v); e == nil {
				err = fmt.Errorf("-%s %q is not host:port; did you mean :%s (every address) or 127.0.0.1:%s?", f.Name, v, v, v)
			}
		}
		if f.Name == "public-url" && !strings.Contains(v, "://") {
			err = fmt.Errorf("-%s %q: want an absolute http(s) URL; did you mean https://%s?", f.Name, v, strings.TrimLeft(v, "/"))
		}
	})
	if err != nil {
		return err
	}
	for _, p := range ratePairs {
		rate, burst := fs.Lookup(p[0]), fs.Lookup(p[1])
		if rate == nil || burst == nil {
			continue
		}
		r, _ := strconv.ParseFloat(rate.Value.String(), 64)
		b, _ := strconv.ParseFloat(burst.Value.String(), 64)
		if r > 0 && b < 1 {
			return fmt.Errorf("-%s %s with -%s %s lets nothing through: give a burst of at least 1, e.g. -%s %s, or -%s 0 for no limit",
				p[1], burst.Value, p[0], rate.Value, p[1], burst.DefValue, p[0])
		}
	}
	if base, max := fs.Lookup("retry-base"), fs.Lookup("retry-max"); base != nil && max != nil {
		b, _ := time.ParseDuration(base.Value.String())
		m, _ := time.ParseDuration(max.Value.String())
		if m < b {
			return errors.New("-retry-max " + m.String() + " is below -retry-base " + b.String() + ": the longest retry delay must be at least the first, e.g. -retry-max 1h")
		}
	}
	return nil
}
