package main

import (
	"context"
	"io"
)

func cmdAll(ctx context.Context, args []string, stdout, stderr io.Writer) error    { return nil }
func cmdCharts(ctx context.Context, args []string, stdout, stderr io.Writer) error { return nil }
