// Package layering holds no code: its test checks, with go list, that the packages import
// one another only as README.md ("Architecture in one paragraph") and ARCHITECTURE.md say
// (backends import only the queue contract, runtime and listener never meet, host/config is
// a leaf, nothing below host imports it). The rules are the table in layering_test.go.
package layering
