package host

// The test fixture under testdata is committed as built .wasm; this rebuilds it.
//go:generate sh -c "cd testdata/flaky && GOOS=wasip1 GOARCH=wasm CGO_ENABLED=0 GOFLAGS= go build -trimpath -buildvcs=false -buildmode=c-shared -o flaky.wasm ."
