// Command upper-stdio is a wasi-stdio handler: a plain WASI command that upper-cases stdin to
// stdout. An empty message exits 65 (EX_DATAERR), which the host treats as reject.
package main

import (
	"bytes"
	"fmt"
	"io"
	"os"
)

func main() {
	in, err := io.ReadAll(os.Stdin)
	if err != nil {
		fmt.Fprintf(os.Stderr, "upper-stdio: read stdin: %v\n", err)
		os.Exit(75) // EX_TEMPFAIL: retry
	}
	if len(bytes.TrimSpace(in)) == 0 {
		fmt.Fprintln(os.Stderr, "upper-stdio: empty message")
		os.Exit(65) // EX_DATAERR: reject
	}
	if _, err := os.Stdout.Write(bytes.ToUpper(in)); err != nil {
		fmt.Fprintf(os.Stderr, "upper-stdio: write stdout: %v\n", err)
		os.Exit(75)
	}
}
