package config

import (
	"os"
	"testing"
)

// FuzzLoad feeds arbitrary YAML to Parse: it must never panic, and whatever it accepts must
// be a config that validates again unchanged.
func FuzzLoad(f *testing.F) {
	for _, p := range []string{"default.yaml", "../../examples/wqhost.yaml"} {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte(binding("        batch_size: 64\n")))
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := Parse(data, dir)
		if err != nil {
			if err.Error() == "" {
				t.Fatal("empty error text")
			}
			return
		}
		if errs := c.validate(); len(errs) > 0 {
			t.Fatalf("accepted config fails validation: %v", errs)
		}
	})
}
