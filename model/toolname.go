package model

import "strings"

// SafeToolName is name as a function tool name the model APIs accept (1
// to 64 letters, digits, underscores and dashes): a name that is one
// already is returned unchanged; otherwise every run of other characters
// becomes one underscore, underscores at the ends are dropped and the
// result is cut to 64 bytes ("greet (structured)" -> "greet_structured").
// An empty result is "tool".
func SafeToolName(name string) string {
	var b strings.Builder
	pendingSep := false
	for _, r := range name {
		ok := r == '_' || r == '-' || (r >= 'a' && r <= 'z') || (r >= 'A' && r <= 'Z') || (r >= '0' && r <= '9')
		if !ok {
			pendingSep = b.Len() > 0
			continue
		}
		if pendingSep {
			b.WriteByte('_')
			pendingSep = false
		}
		b.WriteRune(r)
	}
	out := strings.Trim(b.String(), "_")
	if len(out) > 64 {
		out = out[:64]
	}
	if out == "" {
		return "tool"
	}
	return out
}
