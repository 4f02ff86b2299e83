//go:build !wasip1

package wqhost

import "embed"

// Source holds this SDK's own files (its .go files, go.mod and README.md), so a tool built
// with it (`wqhost new`) can write the SDK into a handler project as a local module that
// builds without network. It exists only off wasm: handlers never carry it.
//
//go:embed *.go go.mod README.md
var Source embed.FS
