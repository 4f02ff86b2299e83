// Package sdk carries the Rust SDK's sources into the wqhost binary, so `wqhost new rust`
// can write them into a handler project as a path dependency (the Go SDK, a module of its own,
// embeds itself: see wqhost.Source in sdk/go).
package sdk

import "embed"

// Rust holds rust/Cargo.toml, rust/README.md and rust/src/*.rs (not rust/target).
//
//go:embed rust/Cargo.toml rust/README.md rust/src/*.rs
var Rust embed.FS
