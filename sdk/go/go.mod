module github.com/wqhost/wqhost/sdk/go

// 1.24: the first Go whose wasip1 port has //go:wasmexport and -buildmode=c-shared reactors.
go 1.24
