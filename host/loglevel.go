package host

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/wqhost/wqhost/host/config"
)

// SetLogLevel hands the host the level its logger filters on (the slog.LevelVar the
// logger's handler was built with): a config reload that changes log.level then sets it,
// where without one such a change is refused as needing a restart. Call it before Run.
func (h *Host) SetLogLevel(v *slog.LevelVar) {
	h.logLevel.Store(v)
}

// liveLogKeys are the log keys a config reload applies in place: log.level when the host
// holds its logger's level.
func (h *Host) liveLogKeys() []string {
	if h.logLevel.Load() != nil {
		return []string{"log.level"}
	}
	return nil
}

// applyLogLevel sets the logger's level to next's log.level when it changed.
func (h *Host) applyLogLevel(cur, next *config.Config) error {
	v := h.logLevel.Load()
	if v == nil || cur.Log.Level == next.Log.Level {
		return nil
	}
	var l slog.Level
	if err := l.UnmarshalText([]byte(next.Log.Level)); err != nil {
		return fmt.Errorf("log.level %q: %w", next.Log.Level, err)
	}
	from := v.Level()
	// Logged at the level that shows in both: a change to error still records itself.
	h.log.Log(context.Background(), max(from, l, slog.LevelInfo), "config reload: log level changed", "from", from.String(), "to", l.String())
	v.Set(l)
	return nil
}
