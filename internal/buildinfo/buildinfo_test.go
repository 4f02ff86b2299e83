package buildinfo

import (
	"runtime/debug"
	"strings"
	"testing"
)

// TestFromBuild: -X values win over the VCS stamp, the stamp fills what -X left empty, and
// a build with neither says so.
func TestFromBuild(t *testing.T) {
	stamped := &debug.BuildInfo{GoVersion: "go1.99", Main: debug.Module{Version: "v0.0.0-20261128-abcdef"},
		Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: "abcdef0123"}, {Key: "vcs.modified", Value: "true"}}}
	for _, tc := range []struct {
		name                string
		bi                  *debug.BuildInfo
		xVersion, xCommit   string
		wantVersion, commit string
	}{
		{"checkout build", stamped, "", "", "v0.0.0-20261128-abcdef", "abcdef0123+dirty"},
		{"image build", &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}}, "v1.2.3", "fedcba9876", "v1.2.3", "fedcba9876"},
		{"-X over the stamp", stamped, "v2.0.0", "1111", "v2.0.0", "1111"},
		{"nothing recorded", &debug.BuildInfo{}, "", "", "(devel)", "unknown"},
		{"no build info", nil, "", "", "(devel)", "unknown"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := fromBuild(tc.bi, tc.xVersion, tc.xCommit)
			if in.Version != tc.wantVersion || in.CommitString() != tc.commit || in.GoVersion == "" {
				t.Errorf("got version %q commit %q go %q, want %q %q", in.Version, in.CommitString(), in.GoVersion, tc.wantVersion, tc.commit)
			}
		})
	}
}

// TestMissingCommitSaysWhy: a build without a commit says how to get one rather than a bare
// "unknown"; a stamped one says nothing more.
func TestMissingCommitSaysWhy(t *testing.T) {
	stamped := &debug.BuildInfo{Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: "abc"}}}
	if got := fromBuild(stamped, "", "").MissingCommit(); got != "" {
		t.Errorf("stamped build: MissingCommit() = %q, want none", got)
	}
	if got := fromBuild(&debug.BuildInfo{}, "", "").MissingCommit(); !strings.Contains(got, "-buildvcs=false") || !strings.Contains(got, "make build") {
		t.Errorf("unstamped build: MissingCommit() = %q, want the causes and the fix", got)
	}
}
