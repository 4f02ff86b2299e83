// Package buildinfo says which wqhost a binary is: its version, the commit it was built
// from and the Go toolchain. A build from a checkout (go build, go install) carries the
// commit in Go's VCS stamp (runtime/debug.ReadBuildInfo); the image and release builds,
// which build with -buildvcs=false or outside the checkout, set it with
//
//	-ldflags "-X github.com/wqhost/wqhost/internal/buildinfo.version=v1.2.3 -X github.com/wqhost/wqhost/internal/buildinfo.commit=<sha>"
//
// and what -X sets wins over the stamp.
package buildinfo

import (
	"runtime"
	"runtime/debug"
	"sync"
)

// Set by -ldflags -X at image and release builds; empty otherwise.
var (
	version = ""
	commit  = ""
)

// Info is what a binary knows about its own build.
type Info struct {
	// Version is the release version (-X), else the module version Go stamped (a pseudo
	// version from the checkout's commit, or "(devel)").
	Version string `json:"version"`
	// Commit is the full commit hash, "" when the build recorded none; Modified says the
	// checkout had uncommitted changes (VCS stamp only).
	Commit   string `json:"commit,omitempty"`
	Modified bool   `json:"modified,omitempty"`
	// GoVersion is the toolchain that built the binary.
	GoVersion string `json:"go_version"`
}

// Read returns the running binary's build information (read once: it cannot change).
func Read() Info { return read() }

var read = sync.OnceValue(func() Info {
	bi, _ := debug.ReadBuildInfo()
	return fromBuild(bi, version, commit)
})

// fromBuild combines the -X values (which win) with the build's own stamp.
func fromBuild(bi *debug.BuildInfo, xVersion, xCommit string) Info {
	in := Info{Version: xVersion, Commit: xCommit, GoVersion: runtime.Version()}
	if bi != nil {
		if bi.GoVersion != "" {
			in.GoVersion = bi.GoVersion
		}
		if in.Version == "" {
			in.Version = bi.Main.Version
		}
		if in.Commit == "" {
			for _, s := range bi.Settings {
				switch s.Key {
				case "vcs.revision":
					in.Commit = s.Value
				case "vcs.modified":
					in.Modified = s.Value == "true"
				}
			}
		}
	}
	if in.Version == "" {
		in.Version = "(devel)"
	}
	return in
}

// CommitString is the commit as wqhost prints it: the full hash, "+dirty" when the checkout
// was modified, "unknown" when the build recorded none.
func (in Info) CommitString() string {
	switch {
	case in.Commit == "":
		return "unknown"
	case in.Modified:
		return in.Commit + "+dirty"
	}
	return in.Commit
}

// MissingCommit says, for a person reading `wqhost version`, why Commit is empty; "" when
// there is a commit. Go records no setting when it was told not to stamp, so the causes are
// listed rather than told apart.
func (in Info) MissingCommit() string {
	if in.Commit != "" {
		return ""
	}
	return "no commit stamped: GOFLAGS=-buildvcs=false, or a build outside a git checkout " +
		"or in a linked worktree; `make build` stamps it with -ldflags -X"
}
