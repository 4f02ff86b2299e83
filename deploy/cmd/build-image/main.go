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
	version := flag.String("version", "", "version wqhost reports and the image's version label")
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
	img, err := image.Build(ctx, image.Options{
		Module: *module, Arch: *arch, Created: created, Revision: revision(ctx, *module), Version: *version,
	})
	if err != nil {
		return err
	}
	if err := image.WriteLayout(*out, *name, img); err != nil {
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
	return nil
}

// revision is the checkout's commit, or "" outside git (the label is left out then).
func revision(ctx context.Context, dir string) string {
	b, err := exec.CommandContext(ctx, "git", "-C", dir, "rev-parse", "HEAD").Output()
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}
