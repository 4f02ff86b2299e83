package azure_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"testing"
	"time"

	"github.com/wqhost/wqhost/listener/azure"
	"github.com/wqhost/wqhost/listener/azure/azuritetest"
	"github.com/wqhost/wqhost/listener/queue"
)

// jsClient runs tools/azurite/interop.js (Microsoft's @azure/storage-queue) against s.
func jsClient(t *testing.T, s *azuritetest.Server, stdin []byte, args ...string) []byte {
	t.Helper()
	dir, err := azuritetest.ToolsDir()
	if err != nil {
		t.Fatal(err)
	}
	// The client comes from where Azurite does: $WQHOST_AZURITE_DIR, else tools/azurite.
	modules := filepath.Join(dir, "node_modules")
	if d := os.Getenv("WQHOST_AZURITE_DIR"); d != "" {
		modules = filepath.Join(d, "node_modules")
	}
	if _, err := os.Stat(filepath.Join(modules, "@azure", "storage-queue")); err != nil {
		azuritetest.SkipOrFail(t, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", append([]string{filepath.Join(dir, "interop.js")}, args...)...)
	cmd.Env = append(os.Environ(), "AZURE_STORAGE_CONNECTION_STRING="+s.ConnectionString(), "NODE_PATH="+modules)
	cmd.Stdin = bytes.NewReader(stdin)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("node interop.js %v: %v\n%s", args, err, stderr.String())
	}
	return out
}

type jsMessage struct {
	ID           string `json:"id"`
	Text         string `json:"text"`
	Body         []byte `json:"body"` // base64 in JSON, decoded by encoding/json
	DequeueCount int    `json:"dequeueCount"`
}

func TestInteropWithJSClient(t *testing.T) {
	s := server(t)
	ctx := context.Background()
	bodies := [][]byte{
		[]byte(`{"order":42,"note":"<&>"}`),
		[]byte("héllo ✓ line\nbreak"),
		[]byte(""),
	}
	for _, enc := range []azure.Encoding{azure.EncodingBase64, azure.EncodingText} {
		t.Run(string(enc), func(t *testing.T) {
			b := open(t, s, enc)

			// JS producer -> wqhost consumer.
			in := "interop-js-to-go-" + string(enc)
			payload, _ := json.Marshal(bodies) // []byte marshals as base64
			var ids []string
			if err := json.Unmarshal(jsClient(t, s, payload, "send", in, string(enc)), &ids); err != nil || len(ids) != len(bodies) {
				t.Fatalf("js send ids %v: %v", ids, err)
			}
			q := openQueue(t, b, in)
			ms := receiveN(t, q, len(bodies), time.Minute)
			for i, m := range ms {
				if m.ID != ids[i] || !bytes.Equal(m.Body, bodies[i]) {
					t.Errorf("message %d: %s %q, want %s %q", i, m.ID, m.Body, ids[i], bodies[i])
				}
				if err := q.Delete(ctx, m); err != nil {
					t.Fatal(err)
				}
			}

			// wqhost producer -> JS consumer; a dead letter with attributes too.
			out := "interop-go-to-js-" + string(enc)
			oq := openQueue(t, b, out)
			want := map[string][]byte{}
			for _, body := range bodies {
				id, err := oq.Send(ctx, body, queue.SendOptions{})
				if err != nil {
					t.Fatal(err)
				}
				want[id] = body
			}
			dlID, err := oq.Send(ctx, []byte("dead"), queue.SendOptions{Attributes: map[string]string{queue.AttrReason: "boom"}})
			if err != nil {
				t.Fatal(err)
			}
			var got []jsMessage
			if err := json.Unmarshal(jsClient(t, s, nil, "receive", out, string(enc), "4"), &got); err != nil {
				t.Fatal(err)
			}
			sort.Slice(got, func(i, j int) bool { return got[i].ID < got[j].ID })
			for _, m := range got {
				if m.ID == dlID {
					// The envelope decodes to JSON a JS consumer can read.
					var env struct {
						Attributes map[string]string `json:"attributes"`
						Text       string            `json:"text"`
					}
					if err := json.Unmarshal(m.Body, &env); err != nil || env.Text != "dead" || env.Attributes[queue.AttrReason] != "boom" {
						t.Errorf("dead letter as seen by JS: %q (%v)", m.Body, err)
					}
					continue
				}
				if w, ok := want[m.ID]; !ok || !bytes.Equal(m.Body, w) || m.DequeueCount != 1 {
					t.Errorf("JS read %s %q count %d, want %q count 1", m.ID, m.Body, m.DequeueCount, w)
				}
				if enc == azure.EncodingBase64 && m.Text != base64.StdEncoding.EncodeToString(m.Body) {
					t.Errorf("JS saw text %q, want the base64 of the body", m.Text)
				}
				delete(want, m.ID)
			}
			if len(want) != 0 {
				t.Errorf("JS did not read %d messages", len(want))
			}
		})
	}
}
