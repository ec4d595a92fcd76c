package sandbox

import "fmt"

// truncationMarker is the line put between head and tail of a cut stream.
func truncationMarker(dropped, total int64) string {
	return fmt.Sprintf("\n…%d bytes truncated (output was %d bytes)…\n", dropped, total)
}
