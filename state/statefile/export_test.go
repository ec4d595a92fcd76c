package statefile

import (
	"sync/atomic"
	"time"
)

// SlowSync is slowSync for the package's external tests.
func SlowSync(j *Journal, d time.Duration) *atomic.Int32 { return slowSync(j, d) }
