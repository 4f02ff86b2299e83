// Package netpolicy decides which outbound HTTP requests a handler may make: URL allow rules
// (scheme, host with wildcards or IP/CIDR, port, path prefix) and the classification of
// addresses that must never be reached unless the rule matching the request names them by IP
// (loopback, private, link-local, cloud metadata and the rest). It has no state: the runtime
// matches each request's URL (and each redirect's) to a rule before sending, and checks every
// resolved address against that rule at dial time.
package netpolicy

import (
	"fmt"
	"net/netip"
	"strconv"
	"strings"
)

// AnyPort in a Rule matches every port.
const AnyPort = -1

// Rule is one parsed http.allow entry.
type Rule struct {
	Raw    string       // the entry as written, for log lines and errors
	Scheme string       // "http" or "https"
	Host   string       // lower-case name, "*.suffix" wildcard, or "*"; empty when Prefix is set
	Prefix netip.Prefix // the IP or CIDR the rule names; invalid for name rules
	Port   int          // AnyPort, or the one port allowed (the scheme's default when omitted)
	Path   string       // path prefix; "" or "/" allows every path
}

// ParseRule parses an allow entry: scheme://host[:port][/path-prefix], where host is a DNS
// name, "*.example.com" (any name below example.com), "*" (any name), an IP ("127.0.0.1",
// "[::1]") or a CIDR in brackets ("[10.0.0.0/8]", "[fd00::/8]"); port is a number or "*".
func ParseRule(s string) (Rule, error) {
	r := Rule{Raw: s}
	scheme, rest, ok := strings.Cut(s, "://")
	if !ok {
		return r, fmt.Errorf("%q: want scheme://host[:port][/path], e.g. https://api.example.com/hooks", s)
	}
	scheme = strings.ToLower(scheme)
	if scheme != "http" && scheme != "https" {
		return r, fmt.Errorf("%q: scheme %q: only http and https", s, scheme)
	}
	r.Scheme = scheme
	var hostport string
	if strings.HasPrefix(rest, "[") {
		end := strings.IndexByte(rest, ']')
		if end < 0 {
			return r, fmt.Errorf("%q: unclosed [", s)
		}
		hostport, rest = rest[:end+1], rest[end+1:]
		if i := strings.IndexByte(rest, '/'); i >= 0 {
			hostport, rest = hostport+rest[:i], rest[i:]
		} else {
			hostport, rest = hostport+rest, ""
		}
	} else if i := strings.IndexByte(rest, '/'); i >= 0 {
		hostport, rest = rest[:i], rest[i:]
	} else {
		hostport, rest = rest, ""
	}
	if strings.ContainsAny(rest, "?#") {
		return r, fmt.Errorf("%q: a rule has no query or fragment", s)
	}
	r.Path = rest
	host, port := hostport, ""
	if strings.HasPrefix(hostport, "[") {
		end := strings.IndexByte(hostport, ']')
		host = hostport[1:end]
		if tail := hostport[end+1:]; tail != "" {
			if !strings.HasPrefix(tail, ":") {
				return r, fmt.Errorf("%q: unexpected %q after ]", s, tail)
			}
			port = tail[1:]
		}
		if strings.Contains(host, "/") {
			p, err := netip.ParsePrefix(host)
			if err != nil {
				return r, fmt.Errorf("%q: CIDR %q: %w", s, host, err)
			}
			r.Prefix = p.Masked()
		} else {
			a, err := netip.ParseAddr(host)
			if err != nil {
				return r, fmt.Errorf("%q: IP %q: %w", s, host, err)
			}
			a = a.Unmap()
			r.Prefix = netip.PrefixFrom(a, a.BitLen())
		}
	} else {
		if i := strings.LastIndexByte(hostport, ':'); i >= 0 {
			host, port = hostport[:i], hostport[i+1:]
		}
		if a, err := netip.ParseAddr(host); err == nil {
			a = a.Unmap()
			r.Prefix = netip.PrefixFrom(a, a.BitLen())
		} else {
			h, err := normHost(host)
			if err != nil {
				return r, fmt.Errorf("%q: %w", s, err)
			}
			r.Host = h
		}
	}
	switch port {
	case "":
		r.Port = defaultPort(scheme)
	case "*":
		r.Port = AnyPort
	default:
		n, err := strconv.Atoi(port)
		if err != nil || n < 1 || n > 65535 {
			return r, fmt.Errorf("%q: port %q: want 1-65535 or *", s, port)
		}
		r.Port = n
	}
	return r, nil
}

func defaultPort(scheme string) int {
	if scheme == "https" {
		return 443
	}
	return 80
}

// normHost lower-cases a rule's host name and checks its shape.
func normHost(h string) (string, error) {
	h = strings.TrimSuffix(strings.ToLower(h), ".")
	if h == "*" {
		return h, nil
	}
	name := strings.TrimPrefix(h, "*.")
	if name == "" || strings.Contains(name, "*") {
		return "", fmt.Errorf("host %q: a wildcard is allowed only as the whole first label (*.example.com) or alone (*)", h)
	}
	for _, label := range strings.Split(name, ".") {
		if label == "" || len(label) > 63 {
			return "", fmt.Errorf("host %q: empty or over-long label", h)
		}
		for _, c := range label {
			if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
				return "", fmt.Errorf("host %q: character %q is not allowed in a host name", h, c)
			}
		}
	}
	return h, nil
}

// Target is the part of a URL a rule matches.
type Target struct {
	Scheme string // lower case
	Host   string // lower case, no trailing dot; an IP literal without brackets
	Port   int
	Path   string
}

// NamesIP reports whether the rule names addresses (an IP or CIDR) rather than host names.
func (r *Rule) NamesIP() bool { return r.Prefix.IsValid() }

// Match reports whether the rule allows t.
func (r *Rule) Match(t Target) bool {
	if r.Scheme != t.Scheme || r.Port != AnyPort && r.Port != t.Port {
		return false
	}
	if r.Prefix.IsValid() {
		a, err := netip.ParseAddr(t.Host)
		if err != nil || !r.Prefix.Contains(a.Unmap()) {
			return false
		}
	} else if !HostMatch(r.Host, t.Host) {
		return false
	}
	return pathMatch(r.Path, t.Path)
}

// HostMatch reports whether host matches pattern: equal, "*" (any name that is not an IP
// literal), or "*.suffix" (a name with at least one label before suffix).
func HostMatch(pattern, host string) bool {
	host = strings.TrimSuffix(strings.ToLower(host), ".")
	switch {
	case pattern == "*":
		_, err := netip.ParseAddr(host)
		return err != nil
	case strings.HasPrefix(pattern, "*."):
		suffix := pattern[1:]
		return len(host) > len(suffix) && strings.HasSuffix(host, suffix)
	default:
		return pattern == host
	}
}

// pathMatch matches on whole segments: "/api" allows "/api" and "/api/x", not "/apix".
func pathMatch(prefix, p string) bool {
	if prefix == "" || prefix == "/" {
		return true
	}
	if p == "" {
		p = "/"
	}
	if strings.HasSuffix(prefix, "/") {
		return strings.HasPrefix(p, prefix)
	}
	return p == prefix || strings.HasPrefix(p, prefix+"/")
}

// Rules is a binding's allow list.
type Rules []Rule

// Match returns the first rule allowing t.
func (rs Rules) Match(t Target) (*Rule, bool) {
	for i := range rs {
		if rs[i].Match(t) {
			return &rs[i], true
		}
	}
	return nil, false
}

// AllowsAddr reports whether the rule lets a connection to addr (with port) be made although
// addr is special: only a rule naming addresses (an IP or CIDR) can, and only for the
// addresses and port it names. A name rule never does, so a host name is never connected to a
// special address whatever it resolves to: that is what keeps a pooled connection, keyed by
// host and port, safe to reuse for any request allowed to that host and port.
func (r *Rule) AllowsAddr(ap netip.AddrPort) bool {
	return r.Prefix.IsValid() && r.Prefix.Contains(ap.Addr().Unmap()) && (r.Port == AnyPort || r.Port == int(ap.Port()))
}

// special ranges, most specific first so the reason names the narrowest class.
var special = []struct {
	p      netip.Prefix
	reason string
}{
	{netip.MustParsePrefix("169.254.169.254/32"), "cloud metadata"},
	{netip.MustParsePrefix("169.254.170.2/32"), "cloud metadata"},
	{netip.MustParsePrefix("100.100.100.200/32"), "cloud metadata"},
	{netip.MustParsePrefix("fd00:ec2::254/128"), "cloud metadata"},
	{netip.MustParsePrefix("0.0.0.0/8"), "unspecified"},
	{netip.MustParsePrefix("127.0.0.0/8"), "loopback"},
	{netip.MustParsePrefix("10.0.0.0/8"), "private"},
	{netip.MustParsePrefix("172.16.0.0/12"), "private"},
	{netip.MustParsePrefix("192.168.0.0/16"), "private"},
	{netip.MustParsePrefix("100.64.0.0/10"), "shared (carrier-grade NAT)"},
	{netip.MustParsePrefix("169.254.0.0/16"), "link-local"},
	{netip.MustParsePrefix("192.0.0.0/24"), "reserved"},
	{netip.MustParsePrefix("198.18.0.0/15"), "reserved"},
	{netip.MustParsePrefix("224.0.0.0/4"), "multicast"},
	{netip.MustParsePrefix("240.0.0.0/4"), "reserved"},
	{netip.MustParsePrefix("::/128"), "unspecified"},
	{netip.MustParsePrefix("::1/128"), "loopback"},
	{netip.MustParsePrefix("fc00::/7"), "private"},
	{netip.MustParsePrefix("fe80::/10"), "link-local"},
	{netip.MustParsePrefix("fec0::/10"), "site-local"},
	{netip.MustParsePrefix("ff00::/8"), "multicast"},
	{netip.MustParsePrefix("100::/64"), "reserved"},
	{netip.MustParsePrefix("2001:db8::/32"), "reserved"},
}

// embeddedV4 returns the IPv4 address carried by an IPv6 address in the mapped
// (::ffff:a.b.c.d), compatible (::a.b.c.d), NAT64 (64:ff9b::/96) or 6to4 (2002::/16) forms.
func embeddedV4(a netip.Addr) (netip.Addr, bool) {
	if !a.Is6() {
		return netip.Addr{}, false
	}
	if a.Is4In6() {
		return a.Unmap(), true
	}
	b := a.As16()
	var zero [10]byte
	switch {
	case [10]byte(b[:10]) == zero && b[10] == 0 && b[11] == 0 && !(b[12] == 0 && b[13] == 0 && b[14] == 0 && b[15] <= 1):
		return netip.AddrFrom4([4]byte(b[12:16])), true
	case b[0] == 0x00 && b[1] == 0x64 && b[2] == 0xff && b[3] == 0x9b && [8]byte(b[4:12]) == [8]byte{}:
		return netip.AddrFrom4([4]byte(b[12:16])), true
	case b[0] == 0x20 && b[1] == 0x02:
		return netip.AddrFrom4([4]byte(b[2:6])), true
	}
	return netip.Addr{}, false
}

// Special reports whether a is an address outbound requests must not reach unless a rule
// names it by IP, and which class it is in ("loopback", "private", "cloud metadata", ...).
func Special(a netip.Addr) (string, bool) {
	a = a.WithZone("")
	if v4, ok := embeddedV4(a); ok {
		if reason, bad := Special(v4); bad {
			return reason + " (embedded in " + a.String() + ")", true
		}
		return "", false
	}
	for _, s := range special {
		if s.p.Contains(a) {
			return s.reason, true
		}
	}
	return "", false
}
