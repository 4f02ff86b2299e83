package main

import (
	"context"
	"fmt"
	goruntime "runtime"
	"runtime/debug"

	"github.com/wqhost/wqhost/runtime"
)

// version is set at release builds with -ldflags "-X main.version=v1.2.3"; otherwise the
// module version and VCS stamp of the build are shown.
var version = ""

func (c *cli) version(_ context.Context, args []string) error {
	fl := c.flags("version", "", "Prints the wqhost version, its commit, the Go toolchain and the guest ABIs it runs.")
	if err := c.parse(fl, args); err != nil {
		return err
	}
	if fl.NArg() != 0 {
		return usagef("takes no arguments")
	}
	v, rev, dirty := version, "", false
	if bi, ok := debug.ReadBuildInfo(); ok {
		if v == "" {
			v = bi.Main.Version
		}
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				rev = s.Value
			case "vcs.modified":
				dirty = s.Value == "true"
			}
		}
	}
	if v == "" {
		v = "(devel)"
	}
	fmt.Fprintf(c.stdout, "wqhost %s\n", v)
	if rev != "" {
		if len(rev) > 12 {
			rev = rev[:12]
		}
		if dirty {
			rev += "+dirty"
		}
		fmt.Fprintf(c.stdout, "commit  %s\n", rev)
	}
	fmt.Fprintf(c.stdout, "go      %s %s/%s\n", goruntime.Version(), goruntime.GOOS, goruntime.GOARCH)
	fmt.Fprintf(c.stdout, "abi     %s, %s, %s\n", runtime.ABIWqhostV1, runtime.ABIWasiStdio, runtime.ABIExtism)
	return nil
}
