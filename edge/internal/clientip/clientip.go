// Package clientip finds the address of the client behind the edge's trusted proxies.
package clientip

import (
	"fmt"
	"net/netip"
	"strings"

	"github.com/gofiber/fiber/v2"
)

// Resolver reads the client's address from Header only when the peer is one of Trusted, and
// then walks the header from the right (what the nearest proxy appended) past every trusted
// hop: the leftmost entries are whatever the client sent and prove nothing.
type Resolver struct {
	Header  string         // e.g. X-Forwarded-For ("": the peer's address)
	Trusted []netip.Prefix // proxies allowed to set Header
}

// ParsePrefixes reads a comma-separated list of CIDRs or addresses (an address is its own /32
// or /128), e.g. "10.0.0.0/8, 192.0.2.7".
func ParsePrefixes(s string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		if p, err := netip.ParsePrefix(f); err == nil {
			out = append(out, p.Masked())
			continue
		}
		a, err := netip.ParseAddr(f)
		if err != nil {
			return nil, fmt.Errorf("%q is neither a CIDR nor an address (e.g. 10.0.0.0/8 or 192.0.2.7)", f)
		}
		out = append(out, netip.PrefixFrom(a.Unmap(), a.Unmap().BitLen()))
	}
	return out, nil
}

// IsTrusted reports whether a is one of the trusted proxies (a peer many clients share).
func (r *Resolver) IsTrusted(a netip.Addr) bool {
	a = a.Unmap()
	for _, p := range r.Trusted {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// IP is the client's address.
func (r *Resolver) IP(c *fiber.Ctx) netip.Addr {
	peer, _ := netip.AddrFromSlice(c.Context().RemoteIP())
	peer = peer.Unmap()
	if r == nil || r.Header == "" || !r.IsTrusted(peer) {
		return peer
	}
	h := c.Get(r.Header)
	for h != "" {
		i := strings.LastIndexByte(h, ',')
		hop := strings.TrimSpace(h[i+1:])
		h = h[:max(i, 0)]
		a, err := netip.ParseAddr(hop)
		if err != nil {
			return peer // a hop that is not an address: stop trusting the chain here
		}
		if !r.IsTrusted(a) {
			return a.Unmap()
		}
		if i < 0 {
			return a.Unmap()
		}
	}
	return peer
}
