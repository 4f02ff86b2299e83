// Command stdio is the wasi-stdio test fixture: it copies stdin to stdout, unless stdin starts
// with "exit:N" (exit with N after a line on stderr) or is "env" (print the WQHOST_ variables).
package main

import (
	"fmt"
	"io"
	"os"
	"sort"
	"strconv"
	"strings"
)

func main() {
	in, err := io.ReadAll(os.Stdin)
	if err != nil {
		os.Exit(1)
	}
	s := string(in)
	switch {
	case strings.HasPrefix(s, "exit:"):
		n, _ := strconv.Atoi(strings.TrimPrefix(s, "exit:"))
		fmt.Fprintln(os.Stderr, "first line")
		fmt.Fprintf(os.Stderr, "exiting with %d\n", n)
		os.Exit(n)
	case s == "env":
		env := os.Environ()
		sort.Strings(env)
		fmt.Print(strings.Join(env, "\n"))
		return
	case s == "loop":
		for {
		}
	}
	os.Stdout.Write(in)
}
