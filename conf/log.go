package conf

import (
	"io"
	"log/slog"
)

// LogSection says what the node logs and how.
type LogSection struct {
	// Level is the least severe level logged: debug, info, warn or error.
	// Default info.
	Level slog.Level `yaml:"level"`
	// Format is text (logfmt-like key=value lines) or json (one object per
	// line). Default text.
	Format LogFormat `yaml:"format"`
}

// LogFormat is how log records are written.
type LogFormat string

// The log formats.
const (
	LogText LogFormat = "text"
	LogJSON LogFormat = "json"
)

// UnmarshalText accepts "text" or "json".
func (f *LogFormat) UnmarshalText(b []byte) error {
	switch s := LogFormat(b); s {
	case LogText, LogJSON:
		*f = s
		return nil
	}
	return reasonf(nil, "unknown log format %s (want text or json)", short(string(b)))
}

// The section has no rules beyond its values' syntax, which the decoder
// checks; check exists so that every section has one.
func (s *LogSection) check(*checker, string) {}

func (s *LogSection) fill() {
	if s.Format == "" {
		s.Format = LogText
	}
}

// parseLevel accepts the four level names only. slog.Level's own
// UnmarshalText also takes "INFO+2" and the like, which is more than an
// operator needs and hides typos.
func parseLevel(s string) (any, error) {
	switch s {
	case "debug":
		return slog.LevelDebug, nil
	case "info":
		return slog.LevelInfo, nil
	case "warn":
		return slog.LevelWarn, nil
	case "error":
		return slog.LevelError, nil
	}
	return nil, reasonf(nil, "unknown log level %s (want debug, info, warn or error)", short(s))
}

// NewLogger returns a logger that writes to w in the section's format, at its
// level and above.
func (f *File) NewLogger(w io.Writer) *slog.Logger {
	return f.NewLoggerLevel(w, nil)
}

// NewLoggerLevel is NewLogger with the level held in lv, set to the file's
// level, so that a reload can change it under the running logger. A nil lv
// fixes the level.
func (f *File) NewLoggerLevel(w io.Writer, lv *slog.LevelVar) *slog.Logger {
	var level slog.Leveler = f.Log.Level
	if lv != nil {
		lv.Set(f.Log.Level)
		level = lv
	}
	opts := &slog.HandlerOptions{Level: level}
	if f.Log.Format == LogJSON {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}
