package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"

	"github.com/wqhost/wqhost/sdk"
	sdkgo "github.com/wqhost/wqhost/sdk/go"
)

const newDoc = `
Writes a ready handler project into DIR (created; it must not exist or be empty): the handler
source, go.mod or Cargo.toml, build.sh with the build command, wqhost.yaml (a sample config
using the built module) and a README. The SDK travels inside this binary and is written into
the project (wqhost-sdk-go/ or wqhost-sdk-rust/) as a local module or crate the project refers
to by path, so the project builds anywhere, without network and without a wqhost checkout.
  go      standard Go (1.24 or newer), GOOS=wasip1 -buildmode=c-shared
  tinygo  TinyGo (scripts/install-tinygo.sh), -scheduler=none -no-debug
  rust    cargo, target wasm32-unknown-unknown (rustup target add, or Debian's
          libstd-rust-dev-wasm32 as scripts/install-rust.sh installs it)
  extism  an Extism plugin (abi extism) in TinyGo, with a small Extism PDK written into the
          project: it runs in wqhost and unchanged in any Extism host`

// The SDK's module path: the project's go.mod replaces it with the copy in wqhost-sdk-go/.
const sdkGoModule = "github.com/wqhost/wqhost/sdk/go"

func (c *cli) newProject(_ context.Context, args []string) error {
	fl := c.flags("new", "go|tinygo|rust|extism DIR", newDoc)
	if err := c.parse(fl, args); err != nil {
		return err
	}
	if fl.NArg() != 2 {
		return usagef("want a kind (go, tinygo, rust or extism) and a directory, got %d arguments (see --help)", fl.NArg())
	}
	kind, dir := fl.Arg(0), fl.Arg(1)
	files, err := projectFiles(kind)
	if err != nil {
		return err
	}
	if dir == "" {
		// os.ReadDir("") fails as "not exist", and the files would land in the working
		// directory, over whatever is there.
		return usagef("the directory is empty: name the one to create")
	}
	if ents, err := os.ReadDir(dir); err == nil && len(ents) > 0 {
		return usagef("%s: exists and is not empty (new writes a fresh project)", dir)
	} else if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return usagef("%s: %v", dir, err)
	}
	for _, name := range sortedKeys(files) {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return fmt.Errorf("new %s: %w", kind, err)
		}
		mode := os.FileMode(0o644)
		if strings.HasSuffix(name, ".sh") {
			mode = 0o755
		}
		if err := os.WriteFile(p, []byte(files[name]), mode); err != nil {
			return fmt.Errorf("new %s: %w", kind, err)
		}
	}
	fmt.Fprintf(c.stdout, "wrote a %s handler project to %s (%d files)\nnext:\n  cd %s\n  ./build.sh\n  wqhost call handler.wasm --body world\n  wqhost run --config wqhost.yaml\n",
		kind, dir, len(files), dir)
	return nil
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// projectFiles returns the project's files by slash path.
func projectFiles(kind string) (map[string]string, error) {
	files := map[string]string{"wqhost.yaml": sampleConfig}
	switch kind {
	case "go", "tinygo":
		if err := copyFS(files, sdkgo.Source, ".", "wqhost-sdk-go"); err != nil {
			return nil, err
		}
		files["main.go"] = goHandler
		files["go.mod"] = "module handler\n\ngo 1.24\n\nrequire " + sdkGoModule + " v0.0.0\n\n// The SDK is the copy written by `wqhost new`, so the project builds without network.\nreplace " + sdkGoModule + " => ./wqhost-sdk-go\n"
		if kind == "go" {
			files["build.sh"] = goBuild
			files["README.md"] = fmt.Sprintf(projectReadme, "Go", "Go 1.24 or newer", goBuildCmd, goNotes)
		} else {
			files["build.sh"] = tinygoBuild
			files["README.md"] = fmt.Sprintf(projectReadme, "TinyGo", "TinyGo 0.41 or newer (wqhost's scripts/install-tinygo.sh installs it)", tinygoBuildCmd, tinygoNotes)
		}
	case "extism":
		extismProject(files)
	case "rust":
		if err := copyFS(files, sdk.Rust, "rust", "wqhost-sdk-rust"); err != nil {
			return nil, err
		}
		files["src/lib.rs"] = rustHandler
		files["Cargo.toml"] = rustCargo
		files["build.sh"] = rustBuild
		files[".gitignore"] = "/target/\n"
		files["README.md"] = fmt.Sprintf(projectReadme, "Rust", "cargo with the wasm32-unknown-unknown target (`rustup target add wasm32-unknown-unknown`, or Debian's `libstd-rust-dev-wasm32`)", rustBuildCmd, rustNotes)
	default:
		return nil, usagef("kind %q: want go, tinygo, rust or extism", kind)
	}
	return files, nil
}

// copyFS adds every file under root of fsys to files, under dest; Go test files stay out.
func copyFS(files map[string]string, fsys fs.FS, root, dest string) error {
	return fs.WalkDir(fsys, root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || strings.HasSuffix(p, "_test.go") {
			return err
		}
		b, err := fs.ReadFile(fsys, p)
		if err != nil {
			return err
		}
		rel := strings.TrimPrefix(strings.TrimPrefix(p, root), "/")
		files[path.Join(dest, rel)] = string(b)
		return nil
	})
}

const sampleConfig = `# A minimal wqhost config running this project's handler.wasm (build it first: ./build.sh).
# Run: wqhost run --config wqhost.yaml    then: wqhost send --queue jobs world
#      wqhost peek --queue jobs-done
tenants:
  default:
    bindings:
      greet:
        queue: jobs
        output: jobs-done
        module: handler.wasm
        config:
          greeting: hello
`

const goHandler = `// Command handler is a wqhost/v1 handler: for each message it emits "<greeting>, <body>" to the
// binding's output queue, where greeting is the binding's config value (default "hello").
package main

import (
	"errors"

	wqhost "github.com/wqhost/wqhost/sdk/go"
)

// Register in init: a reactor (-buildmode=c-shared) runs package initialisation, never main.
func init() {
	wqhost.Handle(handle)
}

func handle(m *wqhost.Message) wqhost.Result {
	body := m.Body() // borrowed: copy it to keep it past this call
	if len(body) == 0 {
		return wqhost.Reject(errors.New("empty message")) // dead-lettered with this reason
	}
	greeting, ok := wqhost.Config("greeting")
	if !ok {
		greeting = "hello"
	}
	wqhost.Info("greeting message " + m.ID())
	out := append([]byte(greeting+", "), body...)
	if err := wqhost.Emit("", out); err != nil { // "" = the binding's output queue
		return wqhost.Retry(0, err) // 0: the binding's retry policy picks the delay
	}
	return wqhost.OK()
}

func main() {}
`

const goBuildCmd = "GOOS=wasip1 GOARCH=wasm go build -trimpath -buildvcs=false -buildmode=c-shared -o handler.wasm ."

const goBuild = `#!/bin/sh
# Builds handler.wasm with standard Go (1.24 or newer).
set -eu
cd "$(dirname "$0")"
GOOS=wasip1 GOARCH=wasm GOFLAGS= "${GO:-go}" build -trimpath -buildvcs=false -buildmode=c-shared -o handler.wasm .
echo "built handler.wasm"
`

const goNotes = "Standard Go modules are about 2 MB and take milliseconds to instantiate; TinyGo " +
	"(`wqhost new tinygo`) gives modules of tens of KB that instantiate in a fraction of a millisecond."

const tinygoBuildCmd = "tinygo build -target=wasip1 -buildmode=c-shared -scheduler=none -no-debug -o handler.wasm ."

const tinygoBuild = `#!/bin/sh
# Builds handler.wasm with TinyGo. -scheduler=none: the default scheduler (asyncify) makes every
# call about a thousand times slower, and a handler starts no goroutines. -no-debug: drops DWARF,
# a module several times smaller that compiles and instantiates faster.
set -eu
cd "$(dirname "$0")"
"${TINYGO:-tinygo}" build -target=wasip1 -buildmode=c-shared -scheduler=none -no-debug -o handler.wasm .
echo "built handler.wasm"
`

const tinygoNotes = "With `-scheduler=none` goroutines cannot be started (a handler needs none), and TinyGo " +
	"builds made from the Go module proxy cannot build packages that import `net`."

const rustHandler = `//! A wqhost/v1 handler: for each message it emits "<greeting>, <body>" to the binding's output
//! queue, where greeting is the binding's config value (default "hello").

fn handle(m: &mut wqhost::Message) -> wqhost::Result {
    let body = m.body().to_vec();
    if body.is_empty() {
        return wqhost::Result::reject("empty message"); // dead-lettered with this reason
    }
    let greeting = wqhost::config("greeting").unwrap_or_else(|| "hello".to_string());
    wqhost::log(wqhost::Level::Info, &format!("greeting message {}", m.id()));
    let mut out = format!("{}, ", greeting).into_bytes();
    out.extend_from_slice(&body);
    match wqhost::emit("", &out) {
        Ok(()) => wqhost::Result::Ok,
        Err(e) => wqhost::Result::retry(0, e), // 0: the binding's retry policy picks the delay
    }
}

wqhost::handler!(handle);
`

const rustCargo = `[package]
name = "handler"
version = "0.1.0"
edition = "2021"
publish = false

# A wasm module is a C-style dynamic library: crate-type belongs under [lib].
[lib]
crate-type = ["cdylib"]
path = "src/lib.rs"

[dependencies]
# The SDK copy written by ` + "`wqhost new`" + `: builds offline, no registry needed.
wqhost = { path = "wqhost-sdk-rust" }

[profile.release]
opt-level = "s"
lto = true
codegen-units = 1
panic = "abort"
strip = true
debug = false
`

const rustBuildCmd = "cargo build --offline --release --target wasm32-unknown-unknown && cp target/wasm32-unknown-unknown/release/handler.wasm ."

const rustBuild = `#!/bin/sh
# Builds handler.wasm: cargo writes target/wasm32-unknown-unknown/release/handler.wasm, copied here.
set -eu
cd "$(dirname "$0")"
"${CARGO:-cargo}" build --offline --quiet --release --target wasm32-unknown-unknown
cp target/wasm32-unknown-unknown/release/handler.wasm handler.wasm
echo "built handler.wasm"
`

const rustNotes = "`wasm32-unknown-unknown` gives a module importing only wqhost functions (about 20 KB)."

const projectReadme = `# A wqhost handler in %s

Made by ` + "`wqhost new`" + `. Needs %s. The wqhost SDK is in this directory (a local
module or crate referenced by path), so this project builds without network.

    ./build.sh                                   # %s
    wqhost call handler.wasm --body world        # one message, as a binding would run it
    wqhost call handler.wasm --body world --config greeting=hi
    wqhost run --config wqhost.yaml              # serve the jobs queue (see wqhost.yaml)

%s
`
