package host

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/wqhost/wqhost/host/config"
	"github.com/wqhost/wqhost/host/source"
)

// TestReloadLogLevel: with the logger's level handed over, a config reload that changes
// log.level applies it at once (debug lines appear, then disappear again) and the bindings
// keep running; log.format still needs a restart and is refused naming it.
func TestReloadLogLevel(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "handler.wasm"), readFixture(t, "v1"), 0o644); err != nil {
		t.Fatal(err)
	}
	tenants := "  a:\n" + tenantBinding("handler.wasm", "")
	writeConfigTop(t, dir, "log: {level: info}\n", tenants)
	cfg, err := source.LoadConfig(config.LoadOptions{File: filepath.Join(dir, "wqhost.yaml"), Environ: []string{}})
	if err != nil {
		t.Fatal(err)
	}
	var out lockedBuffer
	level := new(slog.LevelVar)
	h, err := New(context.Background(), cfg, slog.New(slog.NewTextHandler(&out, &slog.HandlerOptions{Level: level})))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = h.Close(context.Background()) }()
	h.SetLogLevel(level)
	before := h.bindingNamed("a", "w")

	writeConfigTop(t, dir, "log: {level: debug}\n", tenants)
	if _, err := h.ReloadAll(context.Background()); err != nil {
		t.Fatalf("a log.level change refused: %v", err)
	}
	if level.Level() != slog.LevelDebug {
		t.Errorf("level after the reload %s, want DEBUG", level.Level())
	}
	if !strings.Contains(out.String(), "log level changed") || h.bindingNamed("a", "w") != before {
		t.Errorf("the change was not logged, or the binding restarted:\n%s", out.String())
	}
	h.log.Debug("probe-debug-line")
	if !strings.Contains(out.String(), "probe-debug-line") {
		t.Error("a debug line after the change to debug was not written")
	}

	writeConfigTop(t, dir, "log: {level: warn}\n", tenants)
	if _, err := h.ReloadAll(context.Background()); err != nil {
		t.Fatal(err)
	}
	h.log.Info("probe-info-line")
	if level.Level() != slog.LevelWarn || strings.Contains(out.String(), "probe-info-line") {
		t.Errorf("level %s after the change to warn; info written: %v", level.Level(), strings.Contains(out.String(), "probe-info-line"))
	}

	writeConfigTop(t, dir, "log: {level: warn, format: json}\n", tenants)
	if _, err := h.ReloadAll(context.Background()); err == nil || !strings.Contains(err.Error(), "log.format changed; these need a restart") {
		t.Errorf("a log.format change: %v, want it refused naming log.format", err)
	}
}
