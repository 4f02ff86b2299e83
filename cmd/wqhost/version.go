package main

import (
	"context"
	"fmt"
	goruntime "runtime"

	"github.com/wqhost/wqhost/internal/buildinfo"
	"github.com/wqhost/wqhost/runtime"
)

func (c *cli) version(_ context.Context, args []string) error {
	fl := c.flags("version", "", "Prints the wqhost version, its commit, the Go toolchain and the guest ABIs it runs.")
	if err := c.parse(fl, args); err != nil {
		return err
	}
	if fl.NArg() != 0 {
		return usagef("takes no arguments")
	}
	bi := buildinfo.Read()
	fmt.Fprintf(c.stdout, "wqhost %s\n", bi.Version)
	if why := bi.MissingCommit(); why != "" {
		fmt.Fprintf(c.stdout, "commit  %s (%s)\n", bi.CommitString(), why)
	} else {
		fmt.Fprintf(c.stdout, "commit  %s\n", bi.CommitString())
	}
	fmt.Fprintf(c.stdout, "go      %s %s/%s\n", bi.GoVersion, goruntime.GOOS, goruntime.GOARCH)
	fmt.Fprintf(c.stdout, "abi     %s, %s, %s\n", runtime.ABIWqhostV1, runtime.ABIWasiStdio, runtime.ABIExtism)
	return nil
}
