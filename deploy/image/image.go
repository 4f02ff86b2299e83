// Package image builds wqhost's OCI image without a container daemon: one layer, appended to
// an empty base with go-containerregistry, holding the static wqhost binary (CGO off, the
// SDKs and the example handlers embedded in it), CA certificates, an /etc/passwd naming the
// non-root user the image runs as, and the two directories a read-only root filesystem
// still needs (the data directory, a volume's mount point, and /tmp).
//
// The image is reproducible: every file in the layer has the same owner, mode and time
// (Options.Created), the entries are written in a fixed order, the layer is compressed by
// one pinned library, and the binary is built with -trimpath and an empty build id, so one
// commit built twice with one Go toolchain gives one digest.
//
// CA certificates come from golang.org/x/crypto/x509roots/fallback (the Mozilla NSS roots
// that Go ships for systems without their own), pinned by this module's go.sum, not from the
// build machine: the bundle does not change with the machine that builds the image. Roots
// the bundle trusts only under a constraint (a distrust-after date) are left out, since a
// PEM file cannot carry the constraint.
package image

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/pem"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"golang.org/x/crypto/x509roots/fallback/bundle"
)

// Paths and identity inside the image.
const (
	BinaryPath = "/usr/local/bin/wqhost"
	CACertPath = "/etc/ssl/certs/ca-certificates.crt"
	// DataDir is the working directory, so the embedded default's data_dir ("./data")
	// lands under it; mount a volume here (the root filesystem is read-only).
	DataDir = "/var/lib/wqhost"
	// UID and GID of the user "wqhost" the image runs as (distroless' "nonroot").
	UID = 65532
	GID = 65532
	// AdminPort is the port the admin API (probes, metrics) listens on in the chart.
	AdminPort = 8480
)

// Options say what to build.
type Options struct {
	// Module is the wqhost checkout (the directory holding go.mod of
	// github.com/wqhost/wqhost).
	Module string
	// Arch is the GOARCH of the image (default the build machine's).
	Arch string
	// Created is the image's creation time and every file's modification time (default
	// the Unix epoch, as for any reproducible image: SOURCE_DATE_EPOCH sets it).
	Created time.Time
	// Revision is the commit recorded in the org.opencontainers.image.revision label;
	// empty leaves the label out.
	Revision string
	// Version is the version wqhost reports (internal/buildinfo); empty: "(devel)".
	Version string
}

// Build compiles the wqhost binary from o.Module and returns the image.
func Build(ctx context.Context, o Options) (v1.Image, error) {
	if o.Arch == "" {
		o.Arch = goEnv(ctx, "GOARCH")
	}
	tmp, err := os.MkdirTemp("", "wqhost-image-")
	if err != nil {
		return nil, fmt.Errorf("image: %w", err)
	}
	defer os.RemoveAll(tmp)
	bin := filepath.Join(tmp, "wqhost")
	if err := BuildBinary(ctx, o, bin); err != nil {
		return nil, err
	}
	binData, err := os.ReadFile(bin)
	if err != nil {
		return nil, fmt.Errorf("image: read the built binary: %w", err)
	}
	return Assemble(o, binData)
}

// BuildBinary runs go build for linux/o.Arch with CGO off into out: -trimpath and an empty
// build id keep the bytes the same on every build of one commit.
func BuildBinary(ctx context.Context, o Options, out string) error {
	// -buildvcs=false keeps the bytes independent of the checkout's state; the version and
	// commit the binary reports (wqhost version, /v1/status, wqhost_build_info) are set here
	// instead, the commit the same as the image's revision label.
	ldflags := "-s -w -buildid="
	const pkg = "github.com/wqhost/wqhost/internal/buildinfo"
	if o.Version != "" {
		ldflags += " -X " + pkg + ".version=" + o.Version
	}
	if o.Revision != "" {
		ldflags += " -X " + pkg + ".commit=" + o.Revision
	}
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-buildvcs=false", "-ldflags", ldflags, "-o", out, "./cmd/wqhost")
	cmd.Dir = o.Module
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+o.Arch, "GOFLAGS=")
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("image: go build ./cmd/wqhost in %s: %w\n%s", o.Module, err, b)
	}
	return nil
}

func goEnv(ctx context.Context, key string) string {
	b, err := exec.CommandContext(ctx, "go", "env", key).Output()
	if err != nil {
		return ""
	}
	return string(bytes.TrimSpace(b))
}

// Assemble returns the image holding binary as wqhost: one layer on an empty base, OCI
// media types.
func Assemble(o Options, binary []byte) (v1.Image, error) {
	if o.Arch == "" {
		return nil, fmt.Errorf("image: no architecture given")
	}
	layerTar, err := layer(o.Created, binary)
	if err != nil {
		return nil, err
	}
	l, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(layerTar)), nil
	}, tarball.WithMediaType(types.OCILayer))
	if err != nil {
		return nil, fmt.Errorf("image: layer: %w", err)
	}
	base := mutate.ConfigMediaType(mutate.MediaType(empty.Image, types.OCIManifestSchema1), types.OCIConfigJSON)
	img, err := mutate.Append(base, mutate.Addendum{Layer: l, History: v1.History{
		Created: v1.Time{Time: o.Created.UTC()}, CreatedBy: "wqhost deploy/image", Comment: "wqhost binary, CA certificates, passwd",
	}})
	if err != nil {
		return nil, fmt.Errorf("image: append the layer: %w", err)
	}
	labels := map[string]string{
		"org.opencontainers.image.title":       "wqhost",
		"org.opencontainers.image.description": "queue listener handing messages to sandboxed WebAssembly handlers",
		"org.opencontainers.image.source":      "https://github.com/wqhost/wqhost",
	}
	if o.Revision != "" {
		labels["org.opencontainers.image.revision"] = o.Revision
	}
	if o.Version != "" {
		labels["org.opencontainers.image.version"] = o.Version
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, fmt.Errorf("image: config: %w", err)
	}
	cf = cf.DeepCopy()
	cf.Architecture, cf.OS = o.Arch, "linux"
	cf.Created = v1.Time{Time: o.Created.UTC()}
	cf.Config = v1.Config{
		User:         fmt.Sprintf("%d:%d", UID, GID),
		Entrypoint:   []string{BinaryPath},
		Cmd:          []string{"run"},
		WorkingDir:   DataDir,
		Env:          []string{"PATH=/usr/local/bin", "SSL_CERT_FILE=" + CACertPath},
		ExposedPorts: map[string]struct{}{fmt.Sprintf("%d/tcp", AdminPort): {}},
		Labels:       labels,
		StopSignal:   "SIGTERM",
	}
	img, err = mutate.ConfigFile(img, cf)
	if err != nil {
		return nil, fmt.Errorf("image: set the config: %w", err)
	}
	return img, nil
}

// layer writes the image's one layer, uncompressed, entries in a fixed order.
func layer(created time.Time, binary []byte) ([]byte, error) {
	certs, err := caBundle()
	if err != nil {
		return nil, err
	}
	passwd := fmt.Sprintf("root:x:0:0:root:/root:/sbin/nologin\nwqhost:x:%d:%d:wqhost:%s:/sbin/nologin\n", UID, GID, DataDir)
	group := fmt.Sprintf("root:x:0:\nwqhost:x:%d:\n", GID)
	type entry struct {
		name     string
		mode     int64
		uid, gid int
		data     []byte // nil: a directory
	}
	entries := []entry{
		{name: "etc/", mode: 0o755},
		{name: "etc/group", mode: 0o644, data: []byte(group)},
		{name: "etc/passwd", mode: 0o644, data: []byte(passwd)},
		{name: "etc/ssl/", mode: 0o755},
		{name: "etc/ssl/certs/", mode: 0o755},
		{name: "etc/ssl/certs/ca-certificates.crt", mode: 0o644, data: certs},
		{name: "tmp/", mode: 0o1777},
		{name: "usr/", mode: 0o755},
		{name: "usr/local/", mode: 0o755},
		{name: "usr/local/bin/", mode: 0o755},
		{name: "usr/local/bin/wqhost", mode: 0o755, data: binary},
		{name: "var/", mode: 0o755},
		{name: "var/lib/", mode: 0o755},
		{name: "var/lib/wqhost/", mode: 0o750, uid: UID, gid: GID},
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range entries {
		h := &tar.Header{
			Name: e.name, Mode: e.mode, Uid: e.uid, Gid: e.gid, ModTime: created.UTC(),
			Format: tar.FormatPAX, Typeflag: tar.TypeDir,
		}
		if e.data != nil {
			h.Typeflag, h.Size = tar.TypeReg, int64(len(e.data))
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, fmt.Errorf("image: layer entry %s: %w", e.name, err)
		}
		if _, err := tw.Write(e.data); err != nil {
			return nil, fmt.Errorf("image: layer entry %s: %w", e.name, err)
		}
	}
	if err := tw.Close(); err != nil {
		return nil, fmt.Errorf("image: layer: %w", err)
	}
	return buf.Bytes(), nil
}

// caBundle is the PEM file of the fallback bundle's unconstrained roots.
func caBundle() ([]byte, error) {
	var b bytes.Buffer
	n := 0
	for r := range bundle.Roots() {
		if r.Constraint != nil {
			continue
		}
		if err := pem.Encode(&b, &pem.Block{Type: "CERTIFICATE", Bytes: r.Certificate}); err != nil {
			return nil, fmt.Errorf("image: CA bundle: %w", err)
		}
		n++
	}
	if n == 0 {
		return nil, fmt.Errorf("image: the CA bundle (golang.org/x/crypto/x509roots/fallback) holds no roots")
	}
	return b.Bytes(), nil
}
