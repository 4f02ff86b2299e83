package host

import (
	"context"
	"errors"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/wqhost/wqhost/listener/queue"
)

// TestRollback: a binding that ran v1 then v2 is rolled back to v1 (its kept compiled
// module, with a fresh pool), which then handles the messages; reloads of the unchanged
// file (still v2) leave the rollback serving; once the file holds the serving bytes and then
// v2 again, a reload swaps v2 in. The history lists each version with its cause and its own
// messages; a binding with no previous version refuses a rollback.
func TestRollback(t *testing.T) {
	h, dir := reloadHost(t, `
  default:
    bindings:
      echo: {backend: mem, queue: in, output: out, module: handler.wasm}
`)
	h.debounce = time.Hour // reloads here come from ReloadAll only
	ctx := context.Background()
	in, err := h.OpenQueue(ctx, "default", "in")
	if err != nil {
		t.Fatal(err)
	}
	stop := run(t, h)
	defer stop()
	v1, v2 := digestOf(readFixture(t, "v1")), digestOf(readFixture(t, "v2"))
	mod := filepath.Join(dir, "handler.wasm")

	// through sends body and returns the output it led to.
	through := func(body string) string {
		t.Helper()
		if _, err := in.Send(ctx, []byte(body), queue.SendOptions{}); err != nil {
			t.Fatal(err)
		}
		var got []string
		eventually(t, "the output of "+body, func() bool {
			got = append(got, bodiesOf(t, h, "default", "out")...)
			return len(got) > 0
		})
		return got[0]
	}
	reload := func(wantDigest string) {
		t.Helper()
		if _, err := h.ReloadAll(ctx); err != nil {
			t.Fatal(err)
		}
		if d := h.bindingNamed("default", "echo").cur.Load().module.Digest(); d != wantDigest {
			t.Fatalf("after the reload %s serves, want %s", d[:12], wantDigest[:12])
		}
	}

	if got := through("a"); got != "v1:a" {
		t.Fatalf("first output %q", got)
	}
	if _, err := h.Rollback(ctx, "default", "echo"); !errors.Is(err, ErrNoPreviousVersion) {
		t.Fatalf("rollback of a binding that ran one version: %v, want ErrNoPreviousVersion", err)
	}
	if _, err := h.Rollback(ctx, "default", "nope"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("rollback of an unknown binding: %v, want ErrNotFound", err)
	}
	replaceModule(t, mod, readFixture(t, "v2"), false)
	reload(v2)
	if got := through("b"); got != "v2:b" {
		t.Fatalf("output after the reload %q", got)
	}
	res, err := h.Rollback(ctx, "default", "echo")
	if err != nil || res.Digest != v1 || res.Result != SwapRollback {
		t.Fatalf("rollback = %+v, %v; want v1 serving", res, err)
	}
	if got := through("c"); got != "v1:c" {
		t.Fatalf("output after the rollback %q", got)
	}
	reload(v1) // the file still holds v2, the version rolled back from: v1 keeps serving
	if got := through("d"); got != "v1:d" {
		t.Fatalf("output after a reload of the rolled-back file %q", got)
	}

	d, err := h.BindingDetail(ctx, "default", "echo")
	if err != nil {
		t.Fatal(err)
	}
	var causes, digests []string
	var processed []uint64
	for _, v := range d.History {
		causes, digests, processed = append(causes, v.Cause), append(digests, v.Digest), append(processed, v.Processed)
	}
	if !slices.Equal(causes, []string{SwapStart, SwapReload, SwapRollback}) || !slices.Equal(digests, []string{v1, v2, v1}) {
		t.Fatalf("history causes %v digests %v", causes, digests)
	}
	if !slices.Equal(processed, []uint64{1, 1, 2}) {
		t.Errorf("messages per version %v, want [1 1 2]", processed)
	}
	if !d.History[1].Rollback || d.History[0].Rollback || !d.History[2].Serving || d.RolledBackFrom != v2 {
		t.Errorf("rollback target/serving/rolled_back_from wrong: %+v rolled back from %q", d.History, d.RolledBackFrom)
	}
	if d.Status.LastScaling == nil || len(d.Scaling) == 0 {
		t.Errorf("no scaling decision recorded after 4 messages: %+v", d.Scaling)
	}
	if d.Idle.EmptyReceives == 0 || d.Idle.CallsPerHour <= 0 {
		t.Errorf("idle cost %+v: an idle polling binding made empty receives", d.Idle)
	}

	// The file back to the serving bytes settles the rollback; v2 uploaded again serves.
	replaceModule(t, mod, readFixture(t, "v1"), false)
	reload(v1)
	replaceModule(t, mod, readFixture(t, "v2"), false)
	reload(v2)
	if got := through("e"); got != "v2:e" {
		t.Fatalf("output after v2 was uploaded again %q", got)
	}
}
