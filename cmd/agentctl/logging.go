package main

import (
	"context"
	"io"
	"log/slog"
	"strings"

	"github.com/agentctl/agentctl/engine"
)

// newLogger returns the logger AGENTCTL_LOG asks for (trace or debug,
// info, warn, error), writing text records to w; unset or "off" logs
// nothing. Logs carry what the engine reports, which is already scrubbed
// of sensitive values.
func newLogger(environ []string, w io.Writer) *slog.Logger {
	level := ""
	for _, kv := range environ {
		if v, ok := strings.CutPrefix(kv, "AGENTCTL_LOG="); ok {
			level = strings.ToLower(strings.TrimSpace(v))
		}
	}
	var l slog.Level
	switch level {
	case "", "off", "0", "false":
		return slog.New(slog.DiscardHandler)
	case "trace", "debug", "1", "true":
		l = slog.LevelDebug
	case "info":
		l = slog.LevelInfo
	case "warn", "warning":
		l = slog.LevelWarn
	default:
		l = slog.LevelError
	}
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: l}))
}

// logEvents wraps an engine event handler so every event is also logged
// at debug level.
func logEvents(log *slog.Logger, next func(engine.Event)) func(engine.Event) {
	if !log.Enabled(context.Background(), slog.LevelDebug) {
		return next
	}
	return func(ev engine.Event) {
		attrs := []any{"type", ev.Type, "address", ev.Address}
		if ev.Action != "" {
			attrs = append(attrs, "action", ev.Action)
		}
		if ev.Message != "" {
			attrs = append(attrs, "message", ev.Message)
		}
		if ev.Elapsed > 0 {
			attrs = append(attrs, "elapsed", ev.Elapsed)
		}
		if r := ev.Runtime; r != nil {
			attrs = append(attrs, "run_event", r.Type, "agent", r.Agent)
			if r.Name != "" {
				attrs = append(attrs, "tool", r.Name, "call_id", r.CallID)
			}
			if r.Path != "" {
				attrs = append(attrs, "path", r.Path)
			}
		}
		log.Debug("engine event", attrs...)
		if next != nil {
			next(ev)
		}
	}
}
