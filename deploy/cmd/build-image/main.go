// Command build-image builds wqhost's OCI image from a checkout without a container daemon
// (see package github.com/wqhost/wqhost/deploy/image) and writes it as an OCI image layout.
//
//	build-image [-module .] [-o dist/image] [-name wqhost:dev] [-arch amd64]
//
// scripts/build-image.sh runs it from the checkout. The creation time (and every file's)
// is SOURCE_DATE_EPOCH, or the Unix epoch. Load the result with
// `podman pull oci:dist/image:wqhost:dev`, or push it as it is with
// `skopeo copy oci:dist/image:wqhost:dev docker://REGISTRY/wqhost:TAG` or `crane push dist/image REGISTRY/wqhost:TAG`.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/wqhost/wqhost/deploy/image"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "build-image:", err)
		os.Exit(1)
	}
}

func run() error {
	module := flag.String("module", ".", "the wqhost checkout to build")
	out := flag.String("o", "dist/image", "OCI image layout directory to write (replaced)")
	name := flag.String("name", "wqhost:dev", "the image's name in the layout's index")
	arch := flag.String("arch", "", "GOARCH of the image (default the build machine's)")
	version := flag.String("version", "", "version wqhost reports, the image's version label and its tag wqhost:VERSION (default: git describe --tags --always --dirty)")
	tarPath := flag.String("tar", "", "docker-archive to write beside the layout, tagged -name and wqhost:VERSION, for podman/docker load (default: the layout's path + .tar)")
	flag.Parse()

	created := time.Unix(0, 0)
	if s := os.Getenv("SOURCE_DATE_EPOCH"); s != "" {
		sec, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return fmt.Errorf("SOURCE_DATE_EPOCH %q: want seconds since the epoch", s)
		}
		created = time.Unix(sec, 0)
	}
	ctx := context.Background()
	if *version == "" {
		*version = describe(ctx, *module)
	}
	if *tarPath == "" {
		*tarPath = filepath.Clean(*out) + ".tar"
	}
	img, err := image.Build(ctx, image.Options{
		Module: *module, Arch: *arch, Created: created, Revision: revision(ctx, *module), Version: *version,
	})
	if err != nil {
		return err
	}
	if err := image.WriteLayout(*out, *name, img); err != nil {
		return err
	}
	tags := []string{*name}
	if v := "wqhost:" + *version; v != *name {
		tags = append(tags, v)
	}
	if err := image.WriteTarball(*tarPath, img, tags...); err != nil {
		return err
	}
	d, err := img.Digest()
	if err != nil {
		return fmt.Errorf("digest: %w", err)
	}
	size, err := image.Size(img)
	if err != nil {
		return err
	}
	fmt.Printf("image %s written to %s: digest=%s size=%.1f MB\n", *name, *out, d, float64(size)/1e6)
	fmt.Printf("tagged %s in %s: podman load -i %s (or docker load -i)\n", strings.Join(tags, " and "), *tarPath, *tarPath)
	return nil
}

// describe is the checkout's version by git describe (a tag, or the short commit; -dirty
// when the tree has changes), or "dev" outside git.
func describe(ctx context.Context, dir string) string {
	b, err := exec.CommandContext(ctx, "git", "-C", dir, "describe", "--tags", "--always", "--dirty").Output()
	if v := strings.TrimSpace(string(b)); err == nil && v != "" {
		return v
	}
	return "dev"
}

// revision is the checkout's commit, or "" outside git (the label is left out then).
func revision(ctx context.Context, dir string) string {
	b, err := exec.CommandContext(ctx, "git", "-C", dir, "rev-parse", "HEAD").Output()
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}
