package safefile

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestRefusesWhatIsNotARegularFile: a FIFO (which would block an open), /dev/zero (which
// never ends) and a directory are refused at once with ErrNotRegular, a file above the cap
// with ErrTooLarge, each with a message saying what the path is; a regular file is read.
func TestRefusesWhatIsNotARegularFile(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "module.wasm")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	big := filepath.Join(dir, "big.wasm")
	if err := os.WriteFile(big, make([]byte, 1025), 0o644); err != nil {
		t.Fatal(err)
	}
	ok := filepath.Join(dir, "ok.wasm")
	if err := os.WriteFile(ok, []byte("\x00asm"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		path, want string
		is         error
	}{
		{fifo, "a FIFO", ErrNotRegular}, {"/dev/zero", "a character device", ErrNotRegular},
		{dir, "a directory", ErrNotRegular}, {big, "1025 bytes, above the cap of 1024: file too large", ErrTooLarge},
	} {
		done := make(chan error, 2)
		go func() {
			done <- Check(tc.path, 1024)
			_, err := Read(tc.path, 1024)
			done <- err
		}()
		for range 2 {
			select {
			case err := <-done:
				if !errors.Is(err, tc.is) || !strings.Contains(err.Error(), tc.want) {
					t.Errorf("%s: got %v, want %v saying %q", tc.path, err, tc.is, tc.want)
				}
			case <-time.After(5 * time.Second):
				t.Fatalf("%s: still blocked after 5s", tc.path)
			}
		}
	}
	if b, err := Read(ok, 1024); err != nil || string(b) != "\x00asm" {
		t.Fatalf("regular file: %q, %v", b, err)
	}
}
