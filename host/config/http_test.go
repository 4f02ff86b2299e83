package config

import (
	"errors"
	"strings"
	"testing"
)

func TestHTTPBlock(t *testing.T) {
	t.Setenv("WQHOST_TEST_HOOK_TOKEN", "Bearer abc")
	good := binding(`        http:
          allow: ["https://*.example.com/hooks", "http://[127.0.0.1]:*"]
          timeout: 5s
          max_response_bytes: 64KiB
          max_requests_per_message: 3
          credentials:
            hooks: {header: Authorization, value_env: WQHOST_TEST_HOOK_TOKEN, hosts: ["*.example.com"]}
`)
	c, err := Parse([]byte(good), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	h := c.Tenants["acme"].Bindings["orders"].HTTP
	rs, err := h.Rules()
	if err != nil || len(rs) != 2 || rs[0].Host != "*.example.com" || rs[0].Path != "/hooks" || !rs[1].NamesIP() {
		t.Fatalf("rules %+v, %v", rs, err)
	}
	if h.MaxResponseBytes != 64<<10 || h.Credentials["hooks"].ValueEnv != "WQHOST_TEST_HOOK_TOKEN" {
		t.Errorf("decoded %+v", h)
	}
	if def := defaultBinding().HTTP; def.Enabled() || !h.Enabled() {
		t.Errorf("Enabled: default %v, configured %v; want false, true", def.Enabled(), h.Enabled())
	}

	bp := "tenants.acme.bindings.orders.http"
	for _, tt := range []struct {
		name, yaml string
		want       []string
	}{
		{"bad rule", binding("        http: {allow: [\"api.example.com\", \"https://a.*.com\"]}\n"),
			[]string{bp + ".allow[0]: \"api.example.com\": want scheme://host", bp + ".allow[1]: \"https://a.*.com\""}},
		{"bad bounds", binding("        http: {allow: [\"https://x.io\"], timeout: -1s, max_requests_per_message: -2, max_redirects: 99}\n"),
			[]string{bp + ".timeout:", bp + ".max_requests_per_message:", bp + ".max_redirects:"}},
		{"credential problems", binding(`        http:
          allow: ["https://x.io"]
          credentials:
            pay: {header: "Bad Header", value_env: WQHOST_TEST_UNSET_SECRET_VAR}
`), []string{bp + ".credentials.pay.header: \"Bad Header\"", bp + ".credentials.pay.value_env: environment variable WQHOST_TEST_UNSET_SECRET_VAR is not set", bp + ".credentials.pay.hosts: required"}},
		{"credential host with scheme", binding(`        http:
          allow: ["https://x.io"]
          credentials:
            pay: {header: X-Key, value_env: WQHOST_TEST_HOOK_TOKEN, hosts: ["https://x.io"]}
`), []string{bp + ".credentials.pay.hosts[0]:"}},
		{"credentials without rules", binding(`        http:
          credentials:
            pay: {header: X-Key, value_env: WQHOST_TEST_HOOK_TOKEN, hosts: [x.io]}
`), []string{bp + ".credentials: credentials without any http.allow rule"}},
		{"tenant concurrency", "tenants:\n  acme:\n    limits: {http_concurrency: -1}\n    bindings:\n      orders: {queue: orders, module: 'builtin:echo-go'}\n",
			[]string{"tenants.acme.limits.http_concurrency: -1 is outside"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse([]byte(tt.yaml), t.TempDir())
			if err == nil {
				t.Fatal("config accepted")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error lacks %q:\n%v", w, err)
				}
			}
			var ce *Error
			if errors.As(err, &ce) && len(ce.Problems) != len(tt.want) {
				t.Errorf("%d problems, want %d:\n%v", len(ce.Problems), len(tt.want), err)
			}
			if strings.Contains(err.Error(), "Bearer abc") {
				t.Errorf("an error shows the secret: %v", err)
			}
		})
	}
}

func TestWebhookDemoConfigLoads(t *testing.T) {
	t.Setenv("HOOKS_TOKEN", "Bearer demo")
	c, err := Load(fileOptions(t, LoadOptions{File: "../../examples/handlers/webhook-delivery-go/wqhost.yaml", Environ: []string{}}))
	if err != nil {
		t.Fatal(err)
	}
	h := c.Tenants["default"].Bindings["webhooks"].HTTP
	if !h.Enabled() || h.Credentials["hooks"].Header != "Authorization" {
		t.Errorf("http block %+v", h)
	}
}
