// Package safefile reads module and plugin files a config names without trusting what the
// path is: a FIFO would block the reader forever (and with it SIGTERM handling at start), a
// device such as /dev/zero would be read until memory runs out, a directory gives a
// confusing error. Only regular files under a size cap are accepted.
package safefile

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"syscall"

	"github.com/wqhost/wqhost/internal/defaults"
)

// DefaultMaxBytes is the size cap used when none is configured: far above any real module.
const DefaultMaxBytes = defaults.MaxModuleBytes // 256 MiB

// ErrNotRegular reports a path that is not a regular file (a FIFO, device, socket or
// directory).
var ErrNotRegular = errors.New("not a regular file")

// ErrTooLarge reports a regular file above the size cap (or one that grew above it while
// read): a separate error, so the message does not call a large file "not a regular file".
var ErrTooLarge = errors.New("file too large")

// kind names a file mode for an error message.
func kind(m fs.FileMode) string {
	switch {
	case m.IsDir():
		return "a directory"
	case m&fs.ModeNamedPipe != 0:
		return "a FIFO (named pipe)"
	case m&fs.ModeCharDevice != 0:
		return "a character device"
	case m&fs.ModeDevice != 0:
		return "a device"
	case m&fs.ModeSocket != 0:
		return "a socket"
	}
	return "not a regular file (mode " + m.String() + ")"
}

// check returns why fi cannot be read as a file of at most max bytes, or nil.
func check(path string, fi fs.FileInfo, max int64) error {
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("%s is %s: %w", path, kind(fi.Mode()), ErrNotRegular)
	}
	if fi.Size() > max {
		return fmt.Errorf("%s is %d bytes, above the cap of %d: %w", path, fi.Size(), max, ErrTooLarge)
	}
	return nil
}

// Check returns why path (followed through symlinks) is not a regular file of at most max
// bytes, or nil. It never opens the file, so it cannot block.
func Check(path string, max int64) error {
	fi, err := os.Stat(path)
	if err != nil {
		return err
	}
	return check(path, fi, max)
}

// Read returns the contents of path if it is a regular file of at most max bytes. The file
// is opened non-blocking (a FIFO swapped in after a Check cannot hang the open), checked on
// the open descriptor, and read through a limit (a file growing meanwhile is cut off with an
// error, not read without end).
func Read(path string, max int64) ([]byte, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if err := check(path, fi, max); err != nil {
		return nil, err
	}
	data, err := io.ReadAll(io.LimitReader(f, max+1))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	if int64(len(data)) > max {
		return nil, fmt.Errorf("%s grew above the cap of %d bytes while read: %w", path, max, ErrTooLarge)
	}
	return data, nil
}
