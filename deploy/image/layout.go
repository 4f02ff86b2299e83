package image

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// RefNameAnnotation is the OCI annotation naming an image in a layout's index, which
// `podman pull oci:DIR:NAME` and `skopeo copy oci:DIR:NAME …` select it by.
const RefNameAnnotation = "org.opencontainers.image.ref.name"

// WriteLayout writes img as an OCI image layout at dir, named name in the index. An
// existing dir is replaced only if it is empty or an OCI image layout (it holds an
// oci-layout file): a mistyped -o must not remove anything else.
func WriteLayout(dir, name string, img v1.Image) error {
	if _, err := os.Lstat(dir); err == nil {
		entries, err := os.ReadDir(dir)
		if err != nil {
			return fmt.Errorf("image: %s exists and is not an OCI image layout directory; not replacing it: %w", dir, err)
		}
		if _, err := os.Stat(filepath.Join(dir, "oci-layout")); err != nil && len(entries) > 0 {
			return fmt.Errorf("image: %s exists and is not an OCI image layout; not replacing it", dir)
		}
	}
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("image: replace %s: %w", dir, err)
	}
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		return fmt.Errorf("image: layout %s: %w", dir, err)
	}
	if err := p.AppendImage(img, layout.WithAnnotations(map[string]string{RefNameAnnotation: name})); err != nil {
		return fmt.Errorf("image: layout %s: %w", dir, err)
	}
	return nil
}

// Size is the bytes a registry stores for img: manifest, config and compressed layers.
func Size(img v1.Image) (int64, error) {
	m, err := img.Manifest()
	if err != nil {
		return 0, fmt.Errorf("image: manifest: %w", err)
	}
	raw, err := img.RawManifest()
	if err != nil {
		return 0, fmt.Errorf("image: manifest: %w", err)
	}
	n := int64(len(raw)) + m.Config.Size
	for _, l := range m.Layers {
		n += l.Size
	}
	return n, nil
}

// WriteTarball writes img to path as a docker-archive (`docker save`'s format) tagged with
// each of tags (e.g. wqhost:dev and wqhost:v1.2.3), so that `podman load -i` and
// `docker load -i` name the image after its tags; a layout pulled with `podman pull oci:DIR`
// is named after the directory instead. The file is replaced in one rename.
func WriteTarball(path string, img v1.Image, tags ...string) error {
	refs := map[name.Reference]v1.Image{}
	for _, t := range tags {
		ref, err := name.NewTag(t)
		if err != nil {
			return fmt.Errorf("image: tag %q: %w", t, err)
		}
		refs[ref] = img
	}
	if len(refs) == 0 {
		return fmt.Errorf("image: %s: no tag to name the image by", path)
	}
	tmp := path + ".tmp"
	f, err := os.Create(tmp)
	if err != nil {
		return fmt.Errorf("image: %w", err)
	}
	err = tarball.MultiRefWrite(refs, f)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("image: write %s: %w", path, err)
	}
	return nil
}
