// Command noexport declares wqhost/v1 but does not export wqhost_handle.
package main

//go:wasmexport wqhost_abi_v1
func abiV1() {}

func main() {}
