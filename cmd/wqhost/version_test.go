package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestVersionNamesCommit: a binary built from a git checkout prints the checkout's commit
// (Go's VCS stamp, read back through internal/buildinfo). Go stamps only a checkout whose
// .git is a directory: in a linked worktree (.git a file) the test skips and says so.
func TestVersionNamesCommit(t *testing.T) {
	head, err := exec.Command("git", "-C", repoRoot, "rev-parse", "HEAD").Output()
	if err != nil {
		t.Skipf("not a git checkout: %v", err)
	}
	if fi, err := os.Stat(filepath.Join(repoRoot, ".git")); err != nil || !fi.IsDir() {
		t.Skip("a linked git worktree: go build does not stamp the commit there (golang/go: .git must be a directory)")
	}
	r := wq(t, "", "version")
	if r.code != 0 {
		t.Fatalf("wqhost version: exit %d\n%s", r.code, r.stderr)
	}
	commit := strings.TrimSpace(string(head))
	if !strings.Contains(r.stdout, "\ncommit  "+commit) {
		t.Errorf("wqhost version prints\n%s\nwant commit %s", r.stdout, commit)
	}
}
