package runtime

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"

	"github.com/tetratelabs/wazero"
)

// TestLogCapPerCall: a guest calling log in a loop writes at most maxLogsPerCall lines and
// maxLogBytesPerCall bytes to the host log per message; the rest are counted (the pool logs
// one "guest log lines dropped" line with the count after the call).
func TestLogCapPerCall(t *testing.T) {
	ctx := context.Background()
	var logs bytes.Buffer
	logger := slog.New(slog.NewTextHandler(&logs, nil))
	pool := &Pool{logger: logger}
	rt := wazero.NewRuntime(ctx)
	defer rt.Close(ctx)
	if _, err := hostModule(rt).Instantiate(ctx); err != nil {
		t.Fatal(err)
	}
	fns := hostFuncs()
	cm, err := rt.CompileModule(ctx, forwarderModule(fns))
	if err != nil {
		t.Fatal(err)
	}
	mod, err := rt.InstantiateModule(ctx, cm, wazero.NewModuleConfig().WithName(""))
	if err != nil {
		t.Fatal(err)
	}
	mod.Memory().Write(0, bytes.Repeat([]byte("y"), 4096))
	for _, tc := range []struct {
		name          string
		lines, length int
		wantLogged    int
	}{
		{"many short lines", 250, 10, maxLogsPerCall},
		{"few long lines", 50, 4096, maxLogBytesPerCall / 4096},
	} {
		logs.Reset()
		st := &callState{pool: pool, in: &Input{ID: "m"}, out: &Result{}}
		cctx := context.WithValue(ctx, stateKey{}, st)
		for range tc.lines {
			if _, err := mod.ExportedFunction("f_log").Call(cctx, uint64(slog.LevelInfo), 0, uint64(tc.length)); err != nil {
				t.Fatal(err)
			}
		}
		if got := strings.Count(logs.String(), "\n"); got != tc.wantLogged || st.dropped != tc.lines-tc.wantLogged {
			t.Errorf("%s: %d lines logged, %d counted as dropped; want %d and %d", tc.name, got, st.dropped, tc.wantLogged, tc.lines-tc.wantLogged)
		}
	}
}
