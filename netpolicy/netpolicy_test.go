package netpolicy

import (
	"net/netip"
	"strings"
	"testing"
)

func TestParseRuleErrorsNameTheProblem(t *testing.T) {
	for _, tt := range []struct{ in, want string }{
		{"example.com", "scheme://host"},
		{"ftp://example.com", "only http and https"},
		{"https://ex*ample.com", "wildcard"},
		{"https://*.*.example.com", "wildcard"},
		{"https://example.com:0", "port"},
		{"https://example.com:99999", "port"},
		{"https://[10.0.0.0/33]", "CIDR"},
		{"https://[::1", "unclosed"},
		{"https://example.com/a?b", "query"},
		{"https://exa mple.com", "not allowed"},
	} {
		_, err := ParseRule(tt.in)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("ParseRule(%q) = %v, want an error containing %q", tt.in, err, tt.want)
		}
	}
}

func TestRuleMatch(t *testing.T) {
	tg := func(scheme, host string, port int, path string) Target {
		return Target{Scheme: scheme, Host: host, Port: port, Path: path}
	}
	for _, tt := range []struct {
		rule string
		t    Target
		want bool
	}{
		{"https://api.example.com", tg("https", "api.example.com", 443, "/x"), true},
		{"https://api.example.com", tg("http", "api.example.com", 80, "/x"), false},
		{"https://api.example.com", tg("https", "api.example.com", 8443, "/x"), false},
		{"https://api.example.com:*", tg("https", "api.example.com", 8443, "/x"), true},
		{"https://*.example.com", tg("https", "a.b.example.com", 443, "/"), true},
		{"https://*.example.com", tg("https", "example.com", 443, "/"), false},
		{"https://*.example.com", tg("https", "badexample.com", 443, "/"), false},
		{"https://*", tg("https", "anything.org", 443, "/"), true},
		{"https://*", tg("https", "127.0.0.1", 443, "/"), false},
		{"https://api.example.com/hooks", tg("https", "api.example.com", 443, "/hooks/1"), true},
		{"https://api.example.com/hooks", tg("https", "api.example.com", 443, "/hooksx"), false},
		{"https://api.example.com/hooks/", tg("https", "api.example.com", 443, "/hooks"), false},
		{"http://127.0.0.1:*", tg("http", "127.0.0.1", 5555, "/"), true},
		{"http://127.0.0.1:*", tg("http", "localhost", 5555, "/"), false},
		{"http://[10.0.0.0/8]:8080/a", tg("http", "10.1.2.3", 8080, "/a/b"), true},
		{"http://[10.0.0.0/8]:8080/a", tg("http", "11.1.2.3", 8080, "/a/b"), false},
		{"http://[::1]:8080", tg("http", "::1", 8080, "/"), true},
	} {
		r, err := ParseRule(tt.rule)
		if err != nil {
			t.Fatalf("ParseRule(%q): %v", tt.rule, err)
		}
		if got := r.Match(tt.t); got != tt.want {
			t.Errorf("%q.Match(%+v) = %v, want %v", tt.rule, tt.t, got, tt.want)
		}
	}
}

func TestSpecialAddresses(t *testing.T) {
	for _, tt := range []struct {
		addr, want string // want "" = an ordinary public address
	}{
		{"169.254.169.254", "cloud metadata"},
		{"::ffff:169.254.169.254", "cloud metadata"},
		{"::169.254.169.254", "cloud metadata"},
		{"64:ff9b::a9fe:a9fe", "cloud metadata"},
		{"fd00:ec2::254", "cloud metadata"},
		{"100.100.100.200", "cloud metadata"},
		{"127.0.0.1", "loopback"},
		{"127.8.9.10", "loopback"},
		{"::1", "loopback"},
		{"::ffff:127.0.0.1", "loopback"},
		{"2002:7f00:1::", "loopback"},
		{"0.0.0.0", "unspecified"},
		{"::", "unspecified"},
		{"10.1.2.3", "private"},
		{"172.31.255.255", "private"},
		{"192.168.1.1", "private"},
		{"fd12:3456::1", "private"},
		{"169.254.1.1", "link-local"},
		{"fe80::1%eth0", "link-local"},
		{"224.0.0.1", "multicast"},
		{"ff02::1", "multicast"},
		{"100.64.0.1", "carrier-grade"},
		{"8.8.8.8", ""},
		{"::ffff:8.8.8.8", ""},
		{"2606:4700::1111", ""},
		{"172.32.0.1", ""},
	} {
		reason, bad := Special(netip.MustParseAddr(tt.addr))
		if tt.want == "" {
			if bad {
				t.Errorf("Special(%s) = %q, want an ordinary address", tt.addr, reason)
			}
			continue
		}
		if !bad || !strings.Contains(reason, tt.want) {
			t.Errorf("Special(%s) = %q, %v, want %q", tt.addr, reason, bad, tt.want)
		}
	}
}

// TestAllowsAddrOnlyByTheRuleItself: a special address is allowed by the rule that names it,
// never by another rule of the list, and never by a name rule (not even "localhost").
func TestAllowsAddrOnlyByTheRuleItself(t *testing.T) {
	for _, tt := range []struct {
		rule, ap string
		want     bool
	}{
		{"http://127.0.0.1:8080", "127.0.0.1:8080", true},
		{"http://127.0.0.1:8080", "[::ffff:127.0.0.1]:8080", true},
		{"http://127.0.0.1:8080", "127.0.0.1:8081", false},
		{"http://127.0.0.1:8080", "127.0.0.2:8080", false},
		{"http://[127.0.0.1]:18081/public", "127.0.0.1:18081", true},
		{"http://*:*", "127.0.0.1:18081", false}, // the case: another rule named it
		{"http://localhost:*", "127.0.0.1:8080", false},
		{"http://localhost:*", "[::1]:8080", false},
		{"http://[fd00::/8]:*", "[fd00::5]:1", true},
		{"http://[fd00::/8]:*", "[::1]:8080", false},
	} {
		r, err := ParseRule(tt.rule)
		if err != nil {
			t.Fatal(err)
		}
		if got := r.AllowsAddr(netip.MustParseAddrPort(tt.ap)); got != tt.want {
			t.Errorf("%s: AllowsAddr(%s) = %v, want %v", tt.rule, tt.ap, got, tt.want)
		}
	}
}
