// Package egress decides where deliveries may go. A site's webhook URL and Discord webhook are
// typed in by whoever runs the site, so they must not become a way into the network the
// worker sits in (NATS, the edge's own API, cloud metadata, any internal port). It checks them
// twice: the URL when it is saved (CheckWebhookURL, CheckDiscordURL), and the address each
// connection is about to use (Control), because a name that resolved to a public address
// when it was saved can resolve to 127.0.0.1 when the post is sent.
//
// It holds no NATS and no database: the edge (save time) and the worker (send time) share it.
package egress

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"syscall"
	"time"

	"spookat/worker/internal/rawtcp"
)

// Examples of valid targets, for error messages that say what to type instead.
const (
	WebhookExample = "https://example.com/hooks/spookat"
	DiscordExample = "https://discord.com/api/webhooks/123456789012345678/abcDEF"
)

// RefusedError is an address deliveries may not reach.
type RefusedError struct {
	Addr   netip.Addr
	Reason string // "loopback", "private", "cloud metadata", …
}

func (e *RefusedError) Error() string {
	if !e.Addr.IsValid() {
		return "address is " + e.Reason
	}
	return "address " + e.Addr.String() + " is " + e.Reason
}

// refused are the ranges that are not the public internet, most specific first. Go's own
// predicates (IsPrivate, IsLoopback, …) cover the rest in CheckIP.
var refused = []struct {
	prefix netip.Prefix
	reason string
}{
	{netip.MustParsePrefix("169.254.169.254/32"), "cloud metadata"}, // AWS, GCP, Azure, Oracle, …
	{netip.MustParsePrefix("fd00:ec2::254/128"), "cloud metadata"},  // AWS over IPv6
	{netip.MustParsePrefix("100.100.100.200/32"), "cloud metadata"}, // Alibaba
	{netip.MustParsePrefix("0.0.0.0/8"), "unspecified"},             // "this network": Linux connects it to the host
	{netip.MustParsePrefix("100.64.0.0/10"), "shared (CGNAT)"},      // carrier-grade NAT, also cloud-internal
	{netip.MustParsePrefix("192.0.0.0/24"), "reserved"},             // IETF protocol assignments
	{netip.MustParsePrefix("198.18.0.0/15"), "reserved"},            // benchmarking
	{netip.MustParsePrefix("240.0.0.0/4"), "reserved"},              // includes broadcast
	{netip.MustParsePrefix("::/96"), "reserved"},                    // IPv4-compatible (deprecated)
	{netip.MustParsePrefix("::ffff:0:0:0/96"), "reserved"},          // IPv4-translated
	{netip.MustParsePrefix("100::/64"), "reserved"},                 // discard
	{netip.MustParsePrefix("2001:db8::/32"), "reserved"},            // documentation
	{netip.MustParsePrefix("192.0.2.0/24"), "reserved"},             // documentation
	{netip.MustParsePrefix("198.51.100.0/24"), "reserved"},          // documentation
	{netip.MustParsePrefix("203.0.113.0/24"), "reserved"},           // documentation
	{netip.MustParsePrefix("2001::/32"), "reserved"},                // Teredo: embeds an IPv4 address
	{netip.MustParsePrefix("64:ff9b:1::/48"), "reserved"},           // local-use NAT64
	{netip.MustParsePrefix("fec0::/10"), "reserved"},                // site-local (deprecated)
	{netip.MustParsePrefix("ff00::/8"), "multicast"},
}

// embedsV4 are IPv6 prefixes whose addresses carry an IPv4 address in their last 32 bits
// (NAT64) or in bits 16–47 (6to4): a gateway would connect to that IPv4 address.
var (
	nat64  = netip.MustParsePrefix("64:ff9b::/96")
	sixTo4 = netip.MustParsePrefix("2002::/16")
)

// CheckIP returns nil for a public unicast address and a *RefusedError for anything else:
// loopback, private (RFC 1918, fc00::/7), link-local, multicast, unspecified, CGNAT, reserved
// and cloud metadata addresses, IPv4-mapped and NAT64/6to4 IPv6 forms of them included.
func CheckIP(ip netip.Addr) error {
	orig := ip
	ip = ip.Unmap().WithZone("")
	if !ip.IsValid() {
		return &RefusedError{Addr: orig, Reason: "not an address"}
	}
	if ip.Is6() {
		b := ip.As16()
		switch {
		case nat64.Contains(ip):
			if err := CheckIP(netip.AddrFrom4([4]byte(b[12:16]))); err != nil {
				return &RefusedError{Addr: orig, Reason: err.(*RefusedError).Reason}
			}
		case sixTo4.Contains(ip):
			if err := CheckIP(netip.AddrFrom4([4]byte(b[2:6]))); err != nil {
				return &RefusedError{Addr: orig, Reason: err.(*RefusedError).Reason}
			}
		}
	}
	switch {
	case ip.IsUnspecified():
		return &RefusedError{Addr: orig, Reason: "unspecified"}
	case ip.IsLoopback():
		return &RefusedError{Addr: orig, Reason: "loopback"}
	}
	for _, r := range refused {
		if r.prefix.Contains(ip) {
			return &RefusedError{Addr: orig, Reason: r.reason}
		}
	}
	reason := ""
	switch {
	case ip.IsPrivate():
		reason = "private"
	case ip.IsLinkLocalUnicast():
		reason = "link-local"
	case ip.IsMulticast(), ip.IsLinkLocalMulticast(), ip.IsInterfaceLocalMulticast():
		reason = "multicast"
	case ip == netip.AddrFrom4([4]byte{255, 255, 255, 255}):
		reason = "broadcast"
	case !ip.IsGlobalUnicast():
		reason = "reserved"
	}
	if reason != "" {
		return &RefusedError{Addr: orig, Reason: reason}
	}
	return nil
}

// CheckWebhookURL checks a site's webhook URL: https, a host and no user name or password;
// a host that is a literal address must be public. allowPrivate (labs, tests) also takes
// http:// and any address. The error says what is wrong without repeating the URL.
func CheckWebhookURL(raw string, allowPrivate bool) error {
	_, err := parse(raw, allowPrivate)
	return err
}

// CheckDiscordURL checks a site's Discord webhook: https://discord.com/api/webhooks/<id>/<token>
// (discordapp.com too, an API version such as /api/v10/ allowed). allowPrivate (labs, tests)
// takes any URL CheckWebhookURL would, so a mock can stand in. The error never repeats the URL:
// its path holds the webhook's token.
func CheckDiscordURL(raw string, allowPrivate bool) error {
	u, err := parse(raw, allowPrivate)
	if err != nil || allowPrivate {
		return err
	}
	if h := strings.ToLower(u.Hostname()); h != "discord.com" && h != "discordapp.com" {
		return errors.New("must be a Discord webhook on discord.com")
	}
	if p := u.Port(); p != "" && p != "443" {
		return errors.New("must not name a port")
	}
	parts := strings.Split(strings.TrimPrefix(u.EscapedPath(), "/"), "/")
	if len(parts) == 5 && isAPIVersion(parts[1]) {
		parts = append(parts[:1], parts[2:]...)
	}
	if len(parts) != 4 || parts[0] != "api" || parts[1] != "webhooks" || !isDigits(parts[2]) || parts[3] == "" {
		return errors.New("must be a Discord webhook URL (Server Settings → Integrations → Webhooks → Copy Webhook URL)")
	}
	return nil
}

func isAPIVersion(s string) bool {
	return len(s) > 1 && s[0] == 'v' && isDigits(s[1:])
}

func isDigits(s string) bool {
	if s == "" {
		return false
	}
	for _, c := range s {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

func parse(raw string, allowPrivate bool) (*url.URL, error) {
	if len(raw) > 2048 {
		return nil, errors.New("is longer than 2048 characters")
	}
	u, err := url.Parse(raw)
	if err != nil || u.Opaque != "" {
		return nil, errors.New("is not a URL")
	}
	switch {
	case u.Scheme == "https":
	case u.Scheme == "http" && allowPrivate:
	default:
		return nil, errors.New("must start with https://")
	}
	if u.User != nil {
		return nil, errors.New("must not hold a user name or password")
	}
	host := u.Hostname()
	if host == "" {
		return nil, errors.New("needs a host")
	}
	if ip, err := netip.ParseAddr(host); err == nil {
		if ip.Zone() != "" {
			return nil, errors.New("must not name an interface zone")
		}
		if !allowPrivate {
			if err := CheckIP(ip); err != nil {
				return nil, fmt.Errorf("must not point at a non-public address (%w)", err)
			}
		}
		return u, nil
	}
	if endsInNumber(host) {
		// Resolvers read 2130706433, 0x7f.1 or 0177.0.0.1 as IPv4 addresses (inet_aton); a
		// real name never ends in a numeric label (the WHATWG URL standard reads them alike).
		return nil, errors.New("must write an IPv4 address as four decimal numbers (or use a name)")
	}
	if !allowPrivate {
		h := strings.TrimSuffix(strings.ToLower(host), ".")
		switch {
		case h == "localhost" || strings.HasSuffix(h, ".localhost"):
			return nil, errors.New("must not point at localhost")
		case h == "metadata.google.internal" || h == "metadata":
			return nil, errors.New("must not point at cloud metadata")
		}
	}
	return u, nil
}

// endsInNumber reports a host whose last label is a number in any base a resolver accepts.
func endsInNumber(host string) bool {
	host = strings.TrimSuffix(host, ".")
	last := host[strings.LastIndexByte(host, '.')+1:]
	if last == "" {
		return false
	}
	if isDigits(last) {
		return true
	}
	l := strings.ToLower(last)
	if rest, ok := strings.CutPrefix(l, "0x"); ok {
		_, err := strconv.ParseUint("0"+rest, 16, 64)
		return err == nil
	}
	return false
}

// Control is a net.Dialer Control that refuses to connect to a non-public address. It runs
// after name resolution, on the address about to be connected, so a name that resolves
// differently at send time (DNS rebinding) is caught too.
func Control(network, address string, _ syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return &RefusedError{Reason: "not an address"}
	}
	return CheckIP(ap.Addr())
}

// ErrRedirect is what a client from Client answers a 3xx with: redirects are not followed,
// since the Location could point anywhere, the checked host's own neighbours included.
var ErrRedirect = errors.New("redirects are not followed")

// Client builds the HTTP client of a target: connections only to public addresses (unless
// allowPrivate), no redirects (a 3xx comes back as the response), and no proxy from the
// environment while guarded (through a proxy the address check would see only the proxy).
// tr, when not nil, is the transport to guard (its DialContext and Proxy are replaced).
func Client(tr *http.Transport, timeout time.Duration, allowPrivate bool) *http.Client {
	if tr == nil {
		tr = &http.Transport{}
	}
	d := &net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}
	if !allowPrivate {
		d.Control = Control
		tr.Proxy = nil
	}
	tr.DialContext = rawtcp.Dialer{D: d}.DialContext
	return &http.Client{
		Timeout:   timeout,
		Transport: tr,
		CheckRedirect: func(*http.Request, []*http.Request) error {
			return http.ErrUseLastResponse
		},
	}
}

// Reason turns an error of an HTTP request into a short text fit to store and show: it never
// holds the URL (a *url.Error repeats it, path and token included) nor anything the other end
// sent (a non-HTTP service's banner comes back in "malformed HTTP response" errors).
func Reason(err error) string {
	var refused *RefusedError
	var dns *net.DNSError
	var certErr *tls.CertificateVerificationError
	var recErr tls.RecordHeaderError
	var netErr net.Error
	switch {
	case err == nil:
		return ""
	case errors.As(err, &refused):
		return "refused: " + refused.Error()
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &netErr) && netErr.Timeout():
		return "timeout"
	case errors.Is(err, context.Canceled):
		return "canceled"
	case errors.As(err, &dns):
		if dns.IsNotFound {
			return "dns: no such host"
		}
		return "dns: lookup failed"
	case errors.Is(err, syscall.ECONNREFUSED):
		return "connection refused"
	case errors.Is(err, syscall.ECONNRESET):
		return "connection reset"
	case errors.Is(err, syscall.EHOSTUNREACH), errors.Is(err, syscall.ENETUNREACH):
		return "host unreachable"
	case errors.As(err, &certErr):
		return "tls: certificate not valid for the host"
	case errors.As(err, &recErr):
		return "tls: the server does not speak TLS"
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return "connection closed before an answer"
	case strings.Contains(err.Error(), "malformed HTTP"), strings.Contains(err.Error(), "readLoopPeekFailLocked"):
		// net/http has no type for either: an answer that is not HTTP, or bytes that came
		// before the request was sent (a service that greets first, as NATS and SMTP do).
		return "the server does not speak HTTP"
	default:
		return "connection failed"
	}
}
