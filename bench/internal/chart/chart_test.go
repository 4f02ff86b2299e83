package chart

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"testing"
)

func isPNG(t *testing.T, path string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(b, []byte("\x89PNG\r\n\x1a\n")) || len(b) < 2000 {
		t.Fatalf("%s: not a rendered PNG (%d bytes)", path, len(b))
	}
}

func TestLogBars(t *testing.T) {
	f := filepath.Join(t.TempDir(), "bars.png")
	err := LogBars(f, "per call", "ns", []string{"noop", "vowels"}, []Series{
		{"go", []float64{3, 12000}}, {"wqhost", []float64{900, 260000}}, {"extism", []float64{90000, 0}},
	})
	if err != nil {
		t.Fatal(err)
	}
	isPNG(t, f)
	if err := LogBars(f, "empty", "ns", []string{"a"}, []Series{{"x", []float64{0}}}); err == nil {
		t.Error("chart without data rendered")
	}
}

func TestLines(t *testing.T) {
	f := filepath.Join(t.TempDir(), "lines.png")
	err := Lines(f, "scaling", "max workers", "msg/s", []float64{1, 2, 4}, func(x float64) string { return strconv.Itoa(int(x)) }, false,
		[]Line{{Name: "local", X: []float64{1, 2, 4}, Y: []float64{100, 180, 300}}, {Name: "ideal", X: []float64{1, 2, 4}, Y: []float64{100, 200, 400}, Ideal: true}})
	if err != nil {
		t.Fatal(err)
	}
	isPNG(t, f)
	err = Lines(f, "sizes", "size", "msg/s", []float64{1, 2}, func(float64) string { return "" }, true,
		[]Line{{Name: "noop", X: []float64{1, 2}, Y: []float64{0, 5}}})
	if err == nil {
		t.Error("zero plotted on a log scale")
	}
}

func TestMagnitude(t *testing.T) {
	tests := []struct {
		v    float64
		unit string
		want string
	}{{1, "ns", "1 ns"}, {1e4, "ns", "10 µs"}, {1e6, "ns", "1 ms"}, {1e3, "msg/s", "1k"}, {1e6, "msg/s", "1M"}}
	for _, tc := range tests {
		if got := magnitude(tc.v, tc.unit); got != tc.want {
			t.Errorf("magnitude(%g, %s) = %q, want %q", tc.v, tc.unit, got, tc.want)
		}
	}
}
