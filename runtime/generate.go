package runtime

// The guest fixtures under testdata are committed as built .wasm; these rebuild them.
//go:generate sh -c "cd testdata/guest && GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -o guest.wasm ."
//go:generate sh -c "cd testdata/batchguest && GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -o batchguest.wasm ."
//go:generate sh -c "cd testdata/badimport && GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -o badimport.wasm ."
//go:generate sh -c "cd testdata/noexport && GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -o noexport.wasm ."
//go:generate sh -c "cd testdata/stdio && GOOS=wasip1 GOARCH=wasm go build -o stdio.wasm ."
//go:generate sh -c "cd testdata/hang && GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -o hang.wasm ."
//go:generate sh -c "cd testdata/hostile && GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -o hostile.wasm ."
//go:generate sh -c "cd testdata/httpguest && GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -o httpguest.wasm ."
//go:generate sh -c "cd testdata/spin && GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -o spin-go.wasm ."
//go:generate sh -c "cd testdata/spin && tinygo build -target=wasip1 -buildmode=c-shared -scheduler=none -no-debug -o spin-tinygo.wasm ."
//go:generate sh -c "cd testdata/spinrust && RUSTC=/usr/bin/rustc /usr/bin/cargo build --offline --quiet --release --target wasm32-unknown-unknown && cp target/wasm32-unknown-unknown/release/spinrust.wasm . && rm -rf target"
