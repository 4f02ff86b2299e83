package runtime

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"os"

	"github.com/wqhost/wqhost/runtime/internal/fuel"
)

// yieldCode is a module instrumented with a fuel counter (package fuel).
type yieldCode struct {
	wasm []byte
}

// errInstrumentedInvalid marks instrumented bytes that failed validation when a tenant
// compiled them: a defect of the instrumenter (or a damaged cache file), after which the
// module runs uninstrumented under close-on-context-done rather than not at all.
var errInstrumentedInvalid = errors.New("fuel: the instrumented module is not valid")

// instrumentRecovered is fuel.Instrument with a panic turned into an error: the rewriter
// reads untrusted bytes, and a bug of its must cost the module its fuel counter, not the
// host. The error wraps fuel.ErrUndecodable.
func instrumentRecovered(wasm []byte) (yc *yieldCode, err error) {
	defer func() {
		if p := recover(); p != nil {
			yc, err = nil, fmt.Errorf("%w: instrumenter panicked: %v", fuel.ErrUndecodable, p)
		}
	}()
	out, err := fuel.Instrument(wasm)
	if err != nil {
		return nil, err
	}
	return &yieldCode{wasm: out}, nil
}

// sealFuel prefixes an instrumented module with the sha256 of the source module's digest,
// the instrumenter's version and the instrumented bytes, binding the file to the one source
// it was made from.
func sealFuel(digest string, wasm []byte) []byte {
	seal := fuelSeal(digest, wasm)
	return append(seal[:], wasm...)
}

// unsealFuel returns the instrumented module in a file sealFuel wrote for digest, or false.
func unsealFuel(digest string, b []byte) ([]byte, bool) {
	if len(b) < sha256.Size {
		return nil, false
	}
	wasm := b[sha256.Size:]
	seal := fuelSeal(digest, wasm)
	return wasm, bytes.Equal(seal[:], b[:sha256.Size])
}

func fuelSeal(digest string, wasm []byte) [sha256.Size]byte {
	h := sha256.New()
	fmt.Fprintf(h, "wqhost-fuel\x00%d\x00%s\x00", fuel.Version, digest)
	h.Write(wasm)
	var out [sha256.Size]byte
	h.Sum(out[:0])
	return out
}

// sealFacts encodes a module's facts for the cache directory, sealed like an instrumented
// copy: a file that is not these facts for this digest and ABI is never believed.
func sealFacts(digest string, abi ABI, f moduleFacts) []byte {
	b, _ := json.Marshal(f)
	return sealFuel(digest+"|facts|"+string(abi), b)
}

// readFacts reads facts sealFacts wrote for digest and abi.
func readFacts(path, digest string, abi ABI) (moduleFacts, error) {
	var f moduleFacts
	b, err := os.ReadFile(path)
	if err != nil {
		return f, err
	}
	raw, ok := unsealFuel(digest+"|facts|"+string(abi), b)
	if !ok {
		return f, fmt.Errorf("%s: seal does not match", path)
	}
	return f, json.Unmarshal(raw, &f)
}
