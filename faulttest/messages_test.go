package faulttest

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/storage/azqueue"

	"github.com/wqhost/wqhost/listener/azure/azuritetest"
)

type hostileMsg struct {
	name string
	body []byte
}

func binaryBody() []byte {
	b := make([]byte, 0, 1024)
	for i := 0; i < 1024; i++ {
		b = append(b, byte(i*7))
	}
	return b
}

// sendFiles sends each body with `wqhost send --file` and returns the exit results.
func sendFiles(t *testing.T, cfgFile string, env []string, msgs []hostileMsg) map[string]result {
	t.Helper()
	out := map[string]result{}
	for _, m := range msgs {
		f := filepath.Join(t.TempDir(), "body")
		if err := os.WriteFile(f, m.body, 0o644); err != nil {
			t.Fatal(err)
		}
		out[m.name] = wq(t, env, "send", "--config", cfgFile, "--queue", "jobs", "--file", f)
	}
	return out
}

// TestFaultHostileMessagesLocal: empty, 64 KiB, invalid UTF-8, binary and oversized bodies on
// the local store. Each is processed (the echo output is byte-identical) or dead-lettered
// with a reason; none is dropped.
func TestFaultHostileMessagesLocal(t *testing.T) {
	dir := t.TempDir()
	cfgFile := writeConfig(t, dir, fmt.Sprintf(`data_dir: %s
log: {level: error}
tenants:
  default:
    bindings:
      echo:
        queue: jobs
        output: done
        module: builtin:echo-go
        max_dequeue_count: 2
        poison: {base_delay: 100ms, max_delay: 200ms}
`, filepath.Join(dir, "data")))
	processed := []hostileMsg{
		{"empty", []byte{}},
		{"64KiB", bytes.Repeat([]byte("0123456789abcdef"), 4096)},
		{"invalid-utf8", []byte{'a', 0xff, 0xfe, 0xc3, 0x28, 'z'}},
		{"binary", binaryBody()},
		{"nul-only", make([]byte, 100)},
	}
	poisoned := []hostileMsg{{"2MiB", bytes.Repeat([]byte{'x'}, 2<<20)}} // over max_message_bytes (1 MiB)
	for name, r := range sendFiles(t, cfgFile, nil, processed) {
		if r.code != 0 {
			t.Fatalf("send %s: %s", name, r)
		}
	}
	// wqhost send refuses the oversized body itself, naming the limit ...
	for name, r := range sendFiles(t, cfgFile, nil, poisoned) {
		if r.code != 2 || !strings.Contains(r.stderr, "max_message_bytes") {
			t.Fatalf("send %s with the host's config: %s; want exit 2 naming max_message_bytes", name, r)
		}
	}
	// ... so it is put by a producer whose config allows more, as any other producer could.
	producer := writeConfig(t, t.TempDir(), fmt.Sprintf(`data_dir: %s
tenants:
  default:
    limits: {max_message_bytes: 4MiB}
    bindings:
      echo: {queue: jobs, module: builtin:echo-go}
`, filepath.Join(dir, "data")))
	for name, r := range sendFiles(t, producer, nil, poisoned) {
		if r.code != 0 {
			t.Fatalf("send %s by a producer allowing 4MiB: %s", name, r)
		}
	}
	p := startReady(t, cfgFile, nil)
	p.waitDrained("default", "echo", 2*time.Minute)
	if code := p.stop(time.Minute); code != 0 {
		t.Fatalf("SIGTERM: exit %d", code)
	}
	c := checkHostile(t, cfgFile, nil, processed, poisoned, "max_message_bytes")
	report(t, "hostile-messages-local", c)
}

// TestFaultHostileMessagesAzure: the same on Azure Queue Storage with base64 encoding, plus
// raw message text that is not base64 (written by a foreign producer): it is moved to
// jobs-poison with the reason, text kept verbatim. A body too large for Azure is refused by
// `wqhost send` with a clear error, never silently cut.
func TestFaultHostileMessagesAzure(t *testing.T) {
	az := azuritetest.Start(t)
	dir := t.TempDir()
	env := []string{"FAULT_AZURE_CONNECTION_STRING=" + az.ConnectionString()}
	cfgFile := writeConfig(t, dir, fmt.Sprintf(`data_dir: %s
log: {level: error}
backends:
  az:
    type: azure
    connection_string_env: FAULT_AZURE_CONNECTION_STRING
    create_queues: true
    encoding: base64
tenants:
  default:
    bindings:
      echo:
        backend: az
        queue: jobs
        output: done
        module: builtin:echo-go
        max_dequeue_count: 2
        poison: {base_delay: 100ms, max_delay: 200ms}
`, filepath.Join(dir, "data")))
	processed := []hostileMsg{
		{"empty", []byte{}},
		{"40KiB", bytes.Repeat([]byte("0123456789abcdef"), 2560)},
		{"invalid-utf8", []byte{'a', 0xff, 0xfe, 0xc3, 0x28, 'z'}},
		{"binary", binaryBody()},
		{"nul-only", make([]byte, 100)},
	}
	res := sendFiles(t, cfgFile, env, append(processed, hostileMsg{"64KiB", bytes.Repeat([]byte("x"), 64<<10)}))
	for _, m := range processed {
		if r := res[m.name]; r.code != 0 {
			t.Fatalf("send %s: %s", m.name, r)
		}
	}
	// A body the queue cannot carry is the caller's mistake: a usage error, exit 2.
	if r := res["64KiB"]; r.code != 2 || !strings.Contains(r.stderr, "KiB") && !strings.Contains(r.stderr, "bytes") {
		t.Errorf("send of 64 KiB under base64 (beyond Azure's limit): want exit 2 naming the limit, got %s", r)
	} else {
		t.Logf("64 KiB under base64 refused by send: %s", strings.TrimSpace(r.stderr))
	}

	// Foreign producers: raw text that is not base64.
	raw := []string{"this is not base64!", "%%%", "YWJj=garbage"}
	qc, err := azqueue.NewQueueClientFromConnectionString(az.ConnectionString(), "jobs", nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var poisoned []hostileMsg
	for _, r := range raw {
		if _, err := qc.EnqueueMessage(ctx, r, nil); err != nil {
			t.Fatal(err)
		}
		poisoned = append(poisoned, hostileMsg{r, []byte(r)})
	}

	p := startReady(t, cfgFile, env)
	p.waitDrained("default", "echo", 2*time.Minute)
	if code := p.stop(time.Minute); code != 0 {
		t.Fatalf("SIGTERM: exit %d", code)
	}
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		t.Setenv(k, v)
	}
	c := checkHostile(t, cfgFile, env, processed, poisoned, "base64")
	c.sent++ // the 64 KiB body, refused at the door with a clear error
	c.processed++
	c.injected++
	report(t, "hostile-messages-azure", c)
}

// checkHostile checks that every processed body came out of the echo binding unchanged and
// every poisoned one is in jobs-poison with a reason mentioning reason.
func checkHostile(t *testing.T, cfgFile string, env []string, processed, poisoned []hostileMsg, reason string) tally {
	t.Helper()
	want := make([]string, len(processed))
	for i, m := range processed {
		want[i] = string(m.body)
	}
	c, _ := countIDs(want, bodies(readAll(t, loadConfig(t, cfgFile, env), "default", "done")))
	if c.lost != 0 {
		seen := map[string]bool{}
		for _, o := range bodies(readAll(t, loadConfig(t, cfgFile, env), "default", "done")) {
			seen[string(o)] = true
		}
		for _, m := range processed {
			if !seen[string(m.body)] {
				t.Errorf("%s body (%d bytes) did not come out of the echo handler", m.name, len(m.body))
			}
		}
	}
	dead := deadLetters(t, cfgFile, env, "default", "jobs")
	byBody := map[string]string{}
	var full map[string]string // id -> body, read by peek when the listing left it out
	for _, d := range dead {
		body := string(d.Body)
		if d.Body == nil && d.BodyBytes > 0 {
			// poison list reads no body above 4 KiB: peek shows it.
			if full == nil {
				full = peekBodies(t, cfgFile, env, "default", "jobs-poison")
			}
			body = full[d.ID]
		}
		byBody[body] = d.Reason
	}
	for _, m := range poisoned {
		r, ok := byBody[string(m.body)]
		switch {
		case !ok:
			t.Errorf("%s: not in jobs-poison (%d dead letters)", m.name, len(dead))
			c.lost++
		case !strings.Contains(r, reason):
			t.Errorf("%s: dead-lettered with reason %q, want it to mention %q", m.name, r, reason)
			c.processed++
		default:
			t.Logf("jobs-poison: %.40q: %s", m.name, r)
			c.processed++
		}
		c.sent++
	}
	if len(dead) != len(poisoned) {
		t.Errorf("jobs-poison holds %d dead letters, want %d", len(dead), len(poisoned))
	}
	c.injected = c.sent
	return c
}

// peekBodies returns the bodies of a queue's messages by id, read with `wqhost peek --json`.
func peekBodies(t *testing.T, cfgFile string, env []string, tenant, queue string) map[string]string {
	t.Helper()
	r := mustWQ(t, env, "peek", "--config", cfgFile, "--tenant", tenant, "--queue", queue, "--limit", "0", "--json", "--body-bytes", "67108864")
	out := map[string]string{}
	sc := bufio.NewScanner(strings.NewReader(r.stdout))
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	for sc.Scan() {
		var m struct {
			ID         string  `json:"id"`
			Body       *string `json:"body"`
			BodyBase64 []byte  `json:"body_base64"`
		}
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("peek --json: %v", err)
		}
		if m.Body != nil {
			out[m.ID] = *m.Body
		} else {
			out[m.ID] = string(m.BodyBase64)
		}
	}
	return out
}
