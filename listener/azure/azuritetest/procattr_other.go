//go:build !linux

package azuritetest

import "syscall"

// procAttr has no parent-death signal outside Linux: Close must stop Azurite.
func procAttr() *syscall.SysProcAttr { return nil }
