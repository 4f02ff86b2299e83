package external

import (
	"os/exec"
	"syscall"
)

// setProcAttr asks the kernel to kill the plugin when the host dies without Close (crash,
// SIGKILL). Pdeathsig fires when the creating OS thread exits; Go keeps threads alive for the
// process lifetime unless a goroutine exits while locked to one, which this package never does.
func setProcAttr(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
