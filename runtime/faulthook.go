//go:build !wqhost_faulthooks

package runtime

// faultHostFuncs are host functions only a fault-test build has (faulthook_on.go): none in
// a real one.
func faultHostFuncs() []hostFn { return nil }
