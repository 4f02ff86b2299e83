package runtime

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"testing"
)

// FuzzHTTPHostFunctions calls each outbound HTTP host function, through wazero, with
// arbitrary pointers, lengths and handles, under a policy allowing one closed loopback port.
// A function may only trap with a HostCallError, and only when a range really lies outside
// guest memory; it must never panic otherwise, write outside its destination, or return a
// code the ABI does not define for it.
func FuzzHTTPHostFunctions(f *testing.F) {
	ctx := context.Background()
	fns := httpHostFuncs()
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	e, err := NewEngine(ctx, EngineConfig{Logger: logger})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { e.Close(ctx) })
	ten, err := e.Tenant("fuzz", TenantLimits{})
	if err != nil {
		f.Fatal(err)
	}
	pol := HTTPPolicy{Allow: rules(f, "http://127.0.0.1:1"), MaxRequestBytes: 64,
		Credentials: map[string]Credential{"c": {Header: "X-Key", Value: "secret", Hosts: []string{"127.0.0.1"}}}}
	pool := &Pool{t: ten, logger: logger, cfg: PoolConfig{Binding: "b"}, httpc: newOutbound(pol, ten.httpSem, e.httpTr)}

	forward := forwarders(f, fns)
	req := []byte("POSThttp://127.0.0.1:1/x")
	for i := range fns {
		f.Add(uint8(i), uint32(0), uint32(4), uint32(4), uint32(20), req)
		f.Add(uint8(i), uint32(1), uint32(0), uint32(64), uint32(32), []byte("GET\x00http://127.0.0.1:1/"))
		f.Add(uint8(i), uint32(0xFFFFFF00), uint32(4096), uint32(1), uint32(0xFFFFFFFF), []byte{})
		f.Add(uint8(i), uint32(fuzzMemSize-8), uint32(8), uint32(fuzzMemSize), uint32(0), []byte("c"))
	}
	f.Fuzz(func(t *testing.T, which uint8, a, b, c, d uint32, seed []byte) {
		fn := fns[int(which)%len(fns)]
		mod, pattern := forward(t, seed)
		mem := mod.Memory()

		st := &callState{pool: pool, in: &Input{ID: "m"}, out: &Result{}}
		defer st.closeHTTP()
		var args []uint64
		var ranges [][2]uint32
		var dst [2]uint32
		switch fn.name {
		case "http_request":
			// method, url, headers, body, credential: the fuzzer's ranges, shuffled.
			ps := [][2]uint32{{a, b}, {c, d}, {b % 64, a % 64}, {d % 128, c % 128}, {a % 32, d % 4}}
			for _, p := range ps {
				args = append(args, uint64(p[0]), uint64(p[1]))
			}
			ranges = ps
		case "http_status", "http_close":
			args = []uint64{uint64(a)}
		case "http_header":
			args = []uint64{uint64(a), uint64(b), uint64(c), uint64(d), uint64(a ^ b)}
			ranges, dst = [][2]uint32{{b, c}, {d, a ^ b}}, [2]uint32{d, a ^ b}
		case "http_body_read":
			args = []uint64{uint64(a), uint64(b), uint64(c)}
			ranges, dst = [][2]uint32{{b, c}}, [2]uint32{b, c}
		case "http_error":
			args = []uint64{uint64(a), uint64(b)}
			ranges, dst = [][2]uint32{{a, b}}, [2]uint32{a, b}
		}
		res, err := mod.ExportedFunction("f_"+fn.name).Call(context.WithValue(ctx, stateKey{}, st), args...)
		if checkHostCall(t, fn.name, args, ranges, dst, err, mem, pattern) == nil {
			return
		}
		rc := int32(uint32(res[0]))
		switch fn.name {
		case "http_request":
			switch {
			case rc >= 1:
				t.Fatalf("http_request%v = handle %d to a closed port", args, rc)
			case rc == 0:
				t.Fatalf("http_request%v = 0: not an ABI code", args)
			case rc != errNotFound && rc != errDenied && rc != errTooLarge && rc != errLimit && rc != errInvalid && rc != errTimeout && rc != errNetwork:
				t.Fatalf("http_request%v = %d: not an ABI code", args, rc)
			}
			if bytes.Contains([]byte(st.http.lastErr), []byte("secret")) {
				t.Fatalf("http_error text shows the credential: %q", st.http.lastErr)
			}
		case "http_status", "http_close", "http_body_read":
			if rc != errInvalid {
				t.Fatalf("%s%v = %d with no open response, want ERR_INVALID", fn.name, args, rc)
			}
		case "http_header":
			if rc != errInvalid {
				t.Fatalf("http_header%v = %d with no open response, want ERR_INVALID", args, rc)
			}
		case "http_error":
			if rc != errNotFound {
				t.Fatalf("http_error%v = %d with no failed request, want ERR_NOT_FOUND", args, rc)
			}
		}
	})
}
