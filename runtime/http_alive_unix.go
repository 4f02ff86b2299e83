//go:build linux || darwin || freebsd || netbsd || openbsd

package runtime

import (
	"net"
	"syscall"
)

// alive reports whether an idle connection can carry another request: nothing has arrived on
// it, not even the end. One non-blocking peek stands in for the reader goroutine net/http
// keeps on every idle connection to notice a server that hung up.
func alive(c net.Conn) bool {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return true
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return false
	}
	var buf [1]byte
	open := false
	err = rc.Read(func(fd uintptr) bool {
		_, _, rerr := syscall.Recvfrom(int(fd), buf[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		// EAGAIN: nothing to read, so still open. No error: the end (the server closed it)
		// or bytes nobody asked for; either way it cannot carry a request.
		open = rerr == syscall.EAGAIN || rerr == syscall.EWOULDBLOCK
		return true
	})
	return err == nil && open
}
