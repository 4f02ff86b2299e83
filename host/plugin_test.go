package host

import (
	"fmt"
	"net/http/httptest"
	"strings"
	"syscall"
	"testing"
)

func TestPluginPolicyRunsAndDiesWithTheHost(t *testing.T) {
	bin := buildLatencyScaler(t)
	h, _ := newHost(t, fmt.Sprintf(`
  default:
    bindings:
      echo:
        queue: in
        output: out
        module: %q
        scaler: {plugin: %q, args: ["-target", "50ms"], timeout: 200ms}
%s`, abs(t, flakyWasm), bin, fast))
	stop := run(t, h)
	send(t, h, "default", "in", "a", "b", "c")
	eventually(t, "outputs", func() bool { return depth(t, h, "default", "out") == 3 })
	s := bindingStatus(t, h, "default", "echo")
	if len(s.Plugins) != 1 || s.Plugins[0].Policy != "scaler" || s.Plugins[0].Phase != "running" || s.Plugins[0].Pid == 0 {
		t.Fatalf("plugins = %+v", s.Plugins)
	}
	pid := s.Plugins[0].Pid
	srv := httptest.NewServer(h.AdminHandler())
	m := get(t, srv.URL+"/metrics", "", 200)
	srv.Close()
	if !strings.Contains(m, `wqhost_plugin_up{binding="echo",policy="scaler",queue="in",tenant="default"} 1`) {
		t.Errorf("/metrics lacks the plugin's up gauge")
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the plugin process to exit", func() bool {
		return syscall.Kill(pid, 0) != nil
	})
}
