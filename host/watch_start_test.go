package host

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestWatchSeesEditsBeforeRun: /readyz answers 200 from the end of New, before Run starts
// the file watcher; an edit of the config or a module in that gap made no event and was
// missed until the next one. Once watching, the host looks once: the edited module serves
// and the broken config is reported. A look that finds nothing changed leaves the config
// reload's success time alone.
func TestWatchSeesEditsBeforeRun(t *testing.T) {
	t.Run("nothing changed", func(t *testing.T) {
		h, _ := reloadHost(t, "  a:\n"+tenantBinding("handler.wasm", ""))
		defer h.Close(t.Context())
		okAt := h.configErr.lastSuccess()
		stop := run(t, h)
		defer func() { _ = stop() }()
		time.Sleep(300 * time.Millisecond) // room for the look to run; it must change nothing
		if at := h.configErr.lastSuccess(); !at.Equal(okAt) {
			t.Errorf("a look that found nothing changed moved the config reload's success time %s -> %s", okAt, at)
		}
		if s := bindingStatus(t, h, "a", "w"); s.Reloads != 0 {
			t.Errorf("a look that found nothing changed reloaded the module %d times", s.Reloads)
		}
	})
	t.Run("edited before the watch", func(t *testing.T) {
		h, dir := reloadHost(t, "  a:\n"+tenantBinding("handler.wasm", ""))
		defer h.Close(t.Context())
		// Between New and Run: a new module version and a broken config.
		if err := os.WriteFile(filepath.Join(dir, "handler.wasm"), readFixture(t, "v2"), 0o644); err != nil {
			t.Fatal(err)
		}
		writeConfig(t, dir, "  a:\n"+tenantBinding("handler.wasm", ", max_workers: 0"))
		stop := run(t, h)
		defer func() { _ = stop() }()
		deadline := time.Now().Add(30 * time.Second)
		for {
			msg, _ := h.configErr.get()
			s := bindingStatus(t, h, "a", "w")
			if msg != "" && s.Reloads == 1 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("30s after Run: config error %q, module reloads %d; want the broken config reported and the new module serving", msg, s.Reloads)
			}
			time.Sleep(20 * time.Millisecond)
		}
	})
}
