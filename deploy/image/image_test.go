package image

import (
	"archive/tar"
	"context"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// checkout is the wqhost module this module's tests build from.
const checkout = "../.."

// built is one image built for the tests, with the binary in it (which also runs natively:
// a static linux binary).
type built struct {
	binary string
	opts   Options
}

func buildOnce(t *testing.T) built {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	o := Options{Module: checkout, Created: time.Unix(0, 0), Revision: "0123456789abcdef0123456789abcdef01234567", Version: "v0.0.0-imagetest"}
	o.Arch = goEnv(ctx, "GOARCH")
	bin := filepath.Join(t.TempDir(), "wqhost")
	if err := BuildBinary(ctx, o, bin); err != nil {
		t.Fatal(err)
	}
	return built{binary: bin, opts: o}
}

// TestImageReproducibleAndLocked builds the image twice from the checkout (the binary
// compiled each time) and checks that both have one digest, and what the image promises:
// a non-root user, the binary as entrypoint, CA certificates that parse, a data directory
// owned by that user, nothing else writable.
func TestImageReproducibleAndLocked(t *testing.T) {
	b := buildOnce(t)
	data, err := os.ReadFile(b.binary)
	if err != nil {
		t.Fatal(err)
	}
	first, err := Assemble(b.opts, data)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	second, err := Build(ctx, b.opts)
	if err != nil {
		t.Fatal(err)
	}
	d1, err := first.Digest()
	if err != nil {
		t.Fatal(err)
	}
	d2, err := second.Digest()
	if err != nil {
		t.Fatal(err)
	}
	if d1 != d2 {
		t.Errorf("two builds of one checkout: digests %s and %s differ", d1, d2)
	}
	size, err := Size(first)
	if err != nil {
		t.Fatal(err)
	}
	cf, err := first.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if want := fmt.Sprintf("%d:%d", UID, GID); cf.Config.User != want {
		t.Errorf("image user %q, want %q (non-root)", cf.Config.User, want)
	}
	if len(cf.Config.Entrypoint) != 1 || cf.Config.Entrypoint[0] != BinaryPath {
		t.Errorf("entrypoint %q, want [%s]", cf.Config.Entrypoint, BinaryPath)
	}
	// The binary in the image says what the labels say (it runs here too: static linux).
	out, err := exec.Command(b.binary, "version").Output()
	if err != nil {
		t.Fatalf("%s version: %v", b.binary, err)
	}
	checkVersionOutput(t, string(out), cf.Config.Labels)
	layers, err := first.Layers()
	if err != nil || len(layers) != 1 {
		t.Fatalf("layers %d (%v), want 1", len(layers), err)
	}
	rc, err := layers[0].Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	files := map[string]*tar.Header{}
	tr := tar.NewReader(rc)
	var certs []byte
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		files["/"+h.Name] = h
		if "/"+h.Name == CACertPath {
			certs, _ = io.ReadAll(tr)
		}
	}
	if h := files[BinaryPath]; h == nil || h.Mode&0o111 == 0 || h.Uid != 0 {
		t.Errorf("%s: %+v, want an executable owned by root (not writable by the user)", BinaryPath, h)
	}
	if h := files[DataDir+"/"]; h == nil || h.Uid != UID {
		t.Errorf("%s: %+v, want a directory owned by uid %d", DataDir, h, UID)
	}
	for name, h := range files {
		if h.Uid != 0 && name != DataDir+"/" {
			t.Errorf("%s owned by uid %d: only the data directory is the user's", name, h.Uid)
		}
		if !h.ModTime.Equal(b.opts.Created) {
			t.Errorf("%s: time %s, want %s (reproducible)", name, h.ModTime, b.opts.Created)
		}
	}
	n := 0
	for rest := certs; ; {
		var blk *pem.Block
		blk, rest = pem.Decode(rest)
		if blk == nil {
			break
		}
		if _, err := x509.ParseCertificate(blk.Bytes); err != nil {
			t.Fatalf("%s: certificate %d: %v", CACertPath, n, err)
		}
		n++
	}
	if n < 50 {
		t.Errorf("%s holds %d certificates, want a full root bundle", CACertPath, n)
	}
	t.Logf("CA certificates: %d roots from golang.org/x/crypto/x509roots/fallback", n)
	fmt.Printf("image: built digest=%s twice-identical=%t size=%.1f MB\n", d1, d1 == d2, float64(size)/1e6)
}

// TestWriteLayoutReplacesOnlyLayouts: writing the image over a file or a directory that is
// not an image layout (a mistyped -o) is refused and leaves it alone; over a layout it
// replaces it.
func TestWriteLayoutReplacesOnlyLayouts(t *testing.T) {
	img, err := Assemble(Options{Arch: "amd64", Created: time.Unix(0, 0)}, []byte("not really a binary"))
	if err != nil {
		t.Fatal(err)
	}
	other := t.TempDir()
	keep := filepath.Join(other, "precious.txt")
	if err := os.WriteFile(keep, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := WriteLayout(other, "wqhost:test", img); err == nil {
		t.Error("wrote over a directory that is not an image layout")
	}
	if _, err := os.Stat(keep); err != nil {
		t.Errorf("the directory's file is gone: %v", err)
	}
	if err := WriteLayout(keep, "wqhost:test", img); err == nil {
		t.Error("wrote over a file")
	}
	if _, err := os.Stat(keep); err != nil {
		t.Errorf("the file is gone: %v", err)
	}
	dir := filepath.Join(t.TempDir(), "layout")
	for range 2 {
		if err := WriteLayout(dir, "wqhost:test", img); err != nil {
			t.Fatalf("write (and replace) a layout: %v", err)
		}
	}
}

// checkVersionOutput: `wqhost version` names the commit of the image's revision label and
// the version of its version label.
func checkVersionOutput(t *testing.T, out string, labels map[string]string) {
	t.Helper()
	rev, ver := labels["org.opencontainers.image.revision"], labels["org.opencontainers.image.version"]
	if rev == "" || ver == "" {
		t.Fatalf("image labels %v: want a revision and a version", labels)
	}
	if !strings.Contains(out, "\ncommit  "+rev+"\n") || !strings.HasPrefix(out, "wqhost "+ver+"\n") {
		t.Errorf("the image's wqhost version prints\n%s\nwant version %s and commit %s, as its labels say", out, ver, rev)
	}
}

// TestWriteTarballTags: the docker-archive names the image by every tag given (what
// `podman load` and `docker load` name it after), and refuses a tag that is not one.
func TestWriteTarballTags(t *testing.T) {
	img, err := Assemble(Options{Created: time.Unix(0, 0), Arch: "amd64"}, []byte("not really a binary"))
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "image.tar")
	if err := WriteTarball(path, img, "wqhost:dev", "wqhost:v1.2.3"); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tr := tar.NewReader(f)
	var manifest []struct{ RepoTags []string }
	for {
		h, err := tr.Next()
		if err != nil {
			t.Fatalf("no manifest.json in the archive: %v", err)
		}
		if h.Name == "manifest.json" {
			if err := json.NewDecoder(tr).Decode(&manifest); err != nil {
				t.Fatal(err)
			}
			break
		}
	}
	if len(manifest) == 1 {
		slices.Sort(manifest[0].RepoTags)
	}
	if len(manifest) != 1 || !slices.Equal(manifest[0].RepoTags, []string{"wqhost:dev", "wqhost:v1.2.3"}) {
		t.Errorf("archive manifest %+v, want one image tagged wqhost:dev and wqhost:v1.2.3", manifest)
	}
	if err := WriteTarball(path, img, "Not A Tag!"); err == nil {
		t.Error("a bad tag was accepted")
	}
}
