//go:build !linux

package external

import "os/exec"

// setProcAttr has nothing portable to add: outside Linux the host must call Close (or
// go-plugin's CleanupClients) before it exits.
func setProcAttr(*exec.Cmd) {}
