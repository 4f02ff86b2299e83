// Command extism-vowels-tinygo is an Extism plugin, written against the Extism ABI itself
// (imports from extism:host/env, pdk_wasip1.go) rather than wqhost's: it runs unchanged in
// any Extism host and in wqhost under abi extism (docs/abi.md, "extism"). Its function
// count_vowels does what Extism's own count_vowels plugin does: it counts the characters of
// the input found in the config value "vowels" (default aeiouAEIOU), keeps a running total
// in the var "total", and outputs {"count":N,"total":N,"vowels":"..."}; input that is not UTF-8
// fails the call (error_set).
//
// Built by TinyGo (scripts/build-wasm.sh): the Extism Go PDK is not on the module proxy, so
// the few host functions it needs are declared here.
package main

// main is never called in a c-shared (reactor) build; the host calls count_vowels.
func main() {}
