package main

import (
	"fmt"

	"github.com/wqhost/wqhost/examples/handlers"
)

// extismProject adds the files of an Extism plugin project (TinyGo) to files: the plugin,
// the PDK of the extism-vowels-tinygo example, and a config binding it with abi extism.
func extismProject(files map[string]string) {
	files["wqhost.yaml"] = extismConfig
	files["main.go"] = extismHandler
	files["pdk_wasip1.go"] = handlers.ExtismPDK
	files["go.mod"] = "module handler\n\ngo 1.24\n"
	files["build.sh"] = tinygoBuild
	files["README.md"] = fmt.Sprintf(extismReadme, tinygoBuildCmd)
}

const extismConfig = `# A minimal wqhost config running this project's Extism plugin (build it first: ./build.sh).
# Run: wqhost run --config wqhost.yaml    then: wqhost send --queue jobs world
#      wqhost peek --queue jobs-done
tenants:
  default:
    bindings:
      greet:
        queue: jobs
        output: jobs-done
        module: handler.wasm
        abi: extism        # detected from the imports anyway
        function: handle   # the plugin function each message calls
        config:
          greeting: hello
`

const extismHandler = `// Command handler is an Extism plugin: its function handle outputs "<greeting>, <input>",
// where greeting is the config value (default "hello"), and fails an empty input with
// error_set. pdk_wasip1.go declares the extism:host/env functions it uses.
package main

//go:wasmexport handle
func handle() int32 {
	in := input()
	if len(in) == 0 {
		errorSet(store([]byte("empty message"))) // the message fails with this reason
		return 1
	}
	greeting, ok := config("greeting")
	if !ok {
		greeting = "hello"
	}
	out := append([]byte(greeting+", "), in...)
	outputSet(store(out), uint64(len(out))) // sent to the binding's output queue
	return 0
}

// main is never called in a c-shared (reactor) build; the host calls handle.
func main() {}
`

const extismReadme = `# An Extism plugin for wqhost, in TinyGo

Made by ` + "`wqhost new extism`" + `. Needs TinyGo 0.41 or newer (wqhost's scripts/install-tinygo.sh
installs it). The plugin imports only Extism's host functions (` + "`extism:host/env`" + `, declared in
pdk_wasip1.go), so it runs in wqhost (` + "`abi: extism`" + `) and unchanged in any Extism host.

    ./build.sh                                          # %s
    wqhost call handler.wasm --function handle --body world
    wqhost call handler.wasm --function handle --body world --config greeting=hi
    wqhost run --config wqhost.yaml                     # serve the jobs queue (see wqhost.yaml)

Exit code 0 sends the output to the binding's output queue; a non-zero code or error_set fails
the message with that reason (retried, then dead-lettered). See docs/abi.md, "extism".
`
