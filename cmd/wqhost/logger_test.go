package main

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/wqhost/wqhost/host/config"
)

// TestLoggerDurations: the JSON log writes a duration as <key>_seconds, a number of seconds
// (not an integer of nanoseconds with no unit); the text log keeps "1.5s".
func TestLoggerDurations(t *testing.T) {
	for _, tc := range []struct{ format, want string }{{"json", `"delay_seconds":1.5`}, {"text", "delay=1.5s"}} {
		var out bytes.Buffer
		l, err := newLogger(config.Log{Format: tc.format, Level: "info"}, new(slog.LevelVar), &out)
		if err != nil {
			t.Fatal(err)
		}
		l.Info("retrying", "delay", 1500*time.Millisecond, "id", "7")
		if !strings.Contains(out.String(), tc.want) {
			t.Errorf("%s log %q does not hold %s", tc.format, out.String(), tc.want)
		}
		if tc.format == "json" && !json.Valid(bytes.TrimSpace(out.Bytes())) {
			t.Errorf("not JSON: %s", out.String())
		}
	}
}
