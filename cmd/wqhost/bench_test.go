package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestFindBenchDir(t *testing.T) {
	repo, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	other := t.TempDir()
	if err := os.MkdirAll(filepath.Join(other, "bench"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(other, "bench", "go.mod"), []byte("module example.com/bench\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, repo, want, wantErr string
	}{
		{"checkout", repo, filepath.Join(repo, "bench"), ""},
		{"empty dir", t.TempDir(), "", "needs a wqhost source checkout"},
		{"another module's bench", other, "", "github.com/wqhost/wqhost/bench"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := findBenchDir(tc.repo)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) || !strings.Contains(err.Error(), tc.repo) {
					t.Fatalf("findBenchDir(%s) = %q, %v; want an error naming %q and the directory", tc.repo, got, err, tc.wantErr)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("findBenchDir(%s) = %q, %v; want %q", tc.repo, got, err, tc.want)
			}
		})
	}
}

// TestBenchWithoutCheckout: outside a checkout, --help explains where the suite lives (exit
// 0) and a real run is a usage error (exit 2) that says the same.
func TestBenchWithoutCheckout(t *testing.T) {
	for _, tc := range []struct {
		args []string
		code int
	}{
		{[]string{"bench", "--help"}, exitOK},
		{[]string{"bench", "all"}, exitUsage},
	} {
		var out, errb strings.Builder
		c := &cli{stdout: &out, stderr: &errb, getenv: func(k string) string {
			if k == "WQHOST_REPO" {
				return t.TempDir()
			}
			return ""
		}}
		if code := c.main(t.Context(), tc.args); code != tc.code {
			t.Errorf("%v: exit %d, want %d (stderr %q)", tc.args, code, tc.code, errb.String())
		}
		if !strings.Contains(out.String()+errb.String(), "cd bench && go run . all --out ../docs") {
			t.Errorf("%v: output %q does not say how to run the suite", tc.args, out.String()+errb.String())
		}
	}
}
