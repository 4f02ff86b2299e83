package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/wqhost/wqhost/host"
	"github.com/wqhost/wqhost/host/config"
	"github.com/wqhost/wqhost/listener/queue"
)

// TestPoisonListJSONBody: poison list --json prints a text body as text in "body" (as peek
// --json does), a body that is not UTF-8 as base64 in "body_base64" (it used to print every
// body as base64 under "body" without saying so), an empty body as "", and a body above the
// listing limit not at all; control characters in a text body stay escaped for the terminal;
// and each line decodes back into the same host.DeadLetter.
func TestPoisonListJSONBody(t *testing.T) {
	for _, tc := range []struct {
		name       string
		d          host.DeadLetter
		wantFields string // what the line must contain
	}{
		{"text", host.DeadLetter{ID: "a", Body: []byte(`{"order":42,"name":"déjà"}`), BodyBytes: 27}, `"body":"{\"order\":42,\"name\":\"déjà\"}"`},
		{"controls", host.DeadLetter{ID: "b", Body: []byte("x\x1b[2J\x7f\u009b\u202ey"), BodyBytes: 12}, `"body":"x\u001b[2J\u007f\u009b\u202ey"`},
		{"binary", host.DeadLetter{ID: "c", Body: []byte{0, 0xff, 0xfe}, BodyBytes: 3}, `"body_base64":"AP/+"`},
		{"empty", host.DeadLetter{ID: "d", Body: []byte{}}, `"body":""`},
		{"above the listing limit", host.DeadLetter{ID: "e", BodyBytes: 50 << 20}, `"body_bytes":52428800`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out bytes.Buffer
			c := &cli{stdout: &out, stderr: &out}
			if err := c.deadPrinter(true).add(tc.d); err != nil {
				t.Fatal(err)
			}
			line := strings.TrimSpace(out.String())
			if !strings.Contains(line, tc.wantFields) {
				t.Errorf("line %s lacks %s", line, tc.wantFields)
			}
			for _, bad := range []string{"\x1b", "\x7f", "\u009b", "\u202e"} {
				if strings.Contains(line, bad) {
					t.Errorf("line holds %q raw: %q", bad, line)
				}
			}
			if tc.d.Body == nil && strings.Contains(line, `"body`+`"`) || tc.d.Body == nil && strings.Contains(line, "body_base64") {
				t.Errorf("a body above the listing limit printed: %s", line)
			}
			var back host.DeadLetter
			if err := json.Unmarshal([]byte(line), &back); err != nil {
				t.Fatalf("line %q: %v", line, err)
			}
			if back.ID != tc.d.ID || !bytes.Equal(back.Body, tc.d.Body) || back.BodyBytes != tc.d.BodyBytes {
				t.Errorf("decoded %+v, want %+v", back, tc.d)
			}
		})
	}
}

// TestPoisonListContinuationKeepsTheStore: the command a list cut short by --limit prints
// to continue it keeps --data-dir and --json, so running it as printed, from another working
// directory, lists the rest of the same dead letters (it used to drop them and list ./data).
func TestPoisonListContinuationKeepsTheStore(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(t.TempDir()) // a dropped --data-dir would list an empty ./data here
	cfg, err := config.Load(config.LoadOptions{Environ: []string{"WQHOST_DATA_DIR=" + dir}})
	if err != nil {
		t.Fatal(err)
	}
	q, closer, err := host.OpenQueue(t.Context(), cfg, config.DefaultTenant, "jobs"+queue.PoisonSuffix)
	if err != nil {
		t.Fatal(err)
	}
	for _, body := range []string{"first", "second"} {
		if _, err := q.Send(t.Context(), []byte(body), queue.SendOptions{Attributes: map[string]string{queue.AttrReason: "rejected: " + body}}); err != nil {
			t.Fatal(err)
		}
	}
	if err := closer.Close(); err != nil {
		t.Fatal(err)
	}
	run := func(args ...string) (string, string) {
		var out, errb strings.Builder
		c := &cli{stdout: &out, stderr: &errb, getenv: func(string) string { return "" }}
		if code := c.main(t.Context(), args); code != exitOK {
			t.Fatalf("wqhost %s: exit %d, stderr %q", strings.Join(args, " "), code, errb.String())
		}
		return out.String(), errb.String()
	}
	out, stderr := run("poison", "list", "--data-dir", dir, "--queue", "jobs", "--limit", "1", "--json")
	_, hint, ok := strings.Cut(stderr, "more dead letters follow: wqhost ")
	if !ok || strings.Count(out, "\n") != 1 {
		t.Fatalf("a list cut by --limit 1 printed %q and %q; want one line and the command that continues it", out, stderr)
	}
	args := strings.Fields(hint)
	for _, want := range []string{"--data-dir " + dir, "--json", "--after "} {
		if !strings.Contains(hint, want) {
			t.Errorf("continuation %q lacks %q", hint, want)
		}
	}
	rest, _ := run(args...)
	if !strings.Contains(out+rest, `"rejected: first"`) || !strings.Contains(out+rest, `"rejected: second"`) || strings.Count(rest, "\n") != 1 {
		t.Errorf("the first page %q and the continuation %q do not list both dead letters once", out, rest)
	}
}
