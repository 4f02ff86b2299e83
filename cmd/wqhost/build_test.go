package main

import (
	"encoding/json"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/wqhost/wqhost/host"
)

// TestBuildEverywhere: the version and commit `wqhost version` prints are the ones the
// running host logs at start (with its config path), serves in /v1/status and as
// wqhost_build_info.
func TestBuildEverywhere(t *testing.T) {
	r := wq(t, "", "version")
	m := regexp.MustCompile(`^wqhost (\S+)\ncommit  (\S+)[^\n]*\n`).FindStringSubmatch(r.stdout)
	if r.code != 0 || m == nil {
		t.Fatalf("wqhost version: exit %d\n%s", r.code, r.stdout)
	}
	version, commit := m[1], m[2]
	h := startHost(t, t.TempDir())
	defer h.stop(syscall.SIGTERM, time.Minute)

	logs := h.logs()
	start := ""
	for _, l := range strings.Split(logs, "\n") {
		if strings.Contains(l, "wqhost starting") {
			start = l
		}
	}
	for _, want := range []string{"version=" + version, "commit=" + commit, `config="(embedded default)"`} {
		if !strings.Contains(start, want) {
			t.Errorf("start log line %q does not say %s", start, want)
		}
	}
	var st host.Status
	if err := json.Unmarshal(h.get("/v1/status"), &st); err != nil {
		t.Fatal(err)
	}
	if st.Build.Version != version || st.Build.CommitString() != commit || st.Build.GoVersion == "" {
		t.Errorf("/v1/status build %+v, want version %s commit %s", st.Build, version, commit)
	}
	metrics := string(h.get("/metrics"))
	want := `wqhost_build_info{commit="` + commit + `",goversion="` + st.Build.GoVersion + `",version="` + version + `"} 1`
	if !strings.Contains(metrics, want+"\n") {
		t.Errorf("/metrics has no %s", want)
	}
}
