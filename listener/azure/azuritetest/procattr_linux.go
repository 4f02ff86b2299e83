package azuritetest

import "syscall"

// procAttr makes the kernel stop Azurite when the test binary dies without cleaning up (a
// go test timeout panic, SIGKILL), so no emulator outlives its tests.
func procAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
}
