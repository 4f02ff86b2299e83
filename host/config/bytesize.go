package config

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// ByteSize is a size in bytes. In the config it is an integer or a string with a unit:
// "64KiB", "128MiB", "1GiB" (powers of 1024) or "64KB", "128MB", "1GB" (powers of 1000).
type ByteSize int64

// String formats the size with the largest binary unit that divides it.
func (b ByteSize) String() string {
	for _, u := range []struct {
		s string
		n int64
	}{{"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}} {
		if b != 0 && int64(b)%u.n == 0 {
			return strconv.FormatInt(int64(b)/u.n, 10) + u.s
		}
	}
	return strconv.FormatInt(int64(b), 10)
}

// MarshalText lets status and config dumps show "128MiB".
func (b ByteSize) MarshalText() ([]byte, error) { return []byte(b.String()), nil }

var byteUnits = []struct {
	s string
	n int64
}{
	{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30},
	{"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9}, {"K", 1 << 10}, {"M", 1 << 20}, {"G", 1 << 30}, {"B", 1},
}

// ParseByteSize parses "128MiB", "64KB", "1048576".
func ParseByteSize(s string) (ByteSize, error) {
	t := strings.TrimSpace(s)
	mult := int64(1)
	for _, u := range byteUnits {
		if strings.HasSuffix(t, u.s) {
			t, mult = strings.TrimSpace(strings.TrimSuffix(t, u.s)), u.n
			break
		}
	}
	n, err := strconv.ParseInt(t, 10, 64)
	if err != nil || n < 0 || n > math.MaxInt64/mult {
		return 0, fmt.Errorf("expected a size such as \"64MiB\", got %q", s)
	}
	return ByteSize(n * mult), nil
}
