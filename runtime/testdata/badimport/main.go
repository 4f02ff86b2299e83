// Command badimport is a wqhost/v1 module that imports a host function the host lacks.
package main

//go:wasmimport wqhost no_such_function
func noSuch() int32

//go:wasmexport wqhost_abi_v1
func abiV1() {}

//go:wasmexport wqhost_handle
func handle() int32 { return noSuch() }

func main() {}
