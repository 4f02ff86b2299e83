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
// never ends), a directory and a file above the cap are refused at once with ErrNotRegular
// and a message saying what the path is; a regular file is read.
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
	for _, tc := range []struct{ path, want string }{
		{fifo, "a FIFO"}, {"/dev/zero", "a character device"}, {dir, "a directory"}, {big, "1025 bytes, above the cap of 1024"},
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
				if !errors.Is(err, ErrNotRegular) || !strings.Contains(err.Error(), tc.want) {
					t.Errorf("%s: got %v, want ErrNotRegular saying %q", tc.path, err, tc.want)
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
