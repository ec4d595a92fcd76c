package tools

import (
	"regexp"
	"sync"
)

// volatileRe matches the header lines of an exec_command or write_stdin
// result that differ between two runs of the same command: the random
// chunk id and the wall time, followed by a raw newline or, in a JSON
// request body, an escaped one.
var volatileRe = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`Chunk ID: [0-9a-f]{6}(\n|\\n)Wall time: [0-9]+\.[0-9]{4} seconds`)
})

// VolatileText replaces the parts of tool output that differ between two
// runs of the same pipeline (FormatExecOutput's chunk id and wall time)
// with fixed stand-ins, in plain text or JSON text alike, so that a model
// request can be matched against a recorded one (record and replay).
func VolatileText(s string) string {
	return volatileRe().ReplaceAllString(s, "Chunk ID: (id)${1}Wall time: (elapsed) seconds")
}
