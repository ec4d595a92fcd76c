package state

import (
	"errors"
	"fmt"
	"os"
	"os/user"
	"strings"
	"time"

	"github.com/google/uuid"
)

// LockInfo describes the holder of the state lock. It is stored as JSON in
// DIR/state.lock.info.
type LockInfo struct {
	// ID identifies this acquisition; `agentctl force-unlock ID` names it.
	ID string `json:"id"`
	// Operation is what the holder is doing: plan, apply, destroy, ...
	Operation string `json:"operation"`
	// Who is user@host.
	Who     string    `json:"who"`
	PID     int       `json:"pid"`
	Created time.Time `json:"created"`
	// Version is the holder's agentctl version, if known.
	Version string `json:"version,omitempty"`
}

// LockedError is returned when another process holds the state lock.
type LockedError struct {
	// LockFile is the path of the lock file.
	LockFile string
	// Lock describes a lock that is not a file (a remote backend's), in
	// place of LockFile.
	Lock string
	// Info describes the holder; nil when it could not be read (the holder
	// is between taking the lock and recording itself).
	Info *LockInfo
	// Waited is how long Lock retried before giving up.
	Waited time.Duration
}

func (e *LockedError) Error() string {
	var b strings.Builder
	b.WriteString("the state is locked by another agentctl")
	if e.Waited > 0 {
		fmt.Fprintf(&b, " (still locked after waiting %s)", e.Waited.Round(time.Millisecond))
	}
	if i := e.Info; i != nil {
		fmt.Fprintf(&b, ": %s (PID %d) has been running %q since %s (lock ID %s)",
			orUnknown(i.Who), i.PID, i.Operation, i.Created.UTC().Format("2006-01-02 15:04:05 MST"), i.ID)
	} else {
		b.WriteString(": the holder has not recorded itself yet")
	}
	if e.Lock != "" {
		fmt.Fprintf(&b, "; lock: %s. ", e.Lock)
	} else {
		fmt.Fprintf(&b, "; lock file %s. ", e.LockFile)
	}
	b.WriteString("To wait for it, run the command again with -lock-timeout=DURATION (e.g. -lock-timeout=5m). ")
	b.WriteString("If that process is stuck, stop it: the lock is released as soon as it exits, even if killed, and the next command replaces the lock info it left (agentctl force-unlock is not needed).")
	return b.String()
}

func orUnknown(s string) string {
	if s == "" {
		return "(unknown)"
	}
	return s
}

// ErrNotLocked is ForceUnlock's answer when the state holds no lock info:
// the lock was released (its holder exited, and a later command may
// already have taken and released the lock, clearing what was left).
var ErrNotLocked = errors.New("the state is not locked")

// fillLockInfo fills in the ID, who, the PID and the version of info
// when they are empty.
func fillLockInfo(info LockInfo, version string) LockInfo {
	if info.ID == "" {
		info.ID = uuid.NewString()
	}
	if info.Who == "" {
		info.Who = whoAmI()
	}
	if info.PID == 0 {
		info.PID = os.Getpid()
	}
	if info.Version == "" {
		info.Version = version
	}
	return info
}

func whoAmI() string {
	name := ""
	if u, err := user.Current(); err == nil {
		name = u.Username
	}
	if name == "" {
		name = os.Getenv("USER")
	}
	if name == "" {
		name = fmt.Sprintf("uid%d", os.Getuid())
	}
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "localhost"
	}
	return name + "@" + host
}

// NewLockInfo fills in what Lock fills in when info leaves it empty:
// the ID, who, the PID and the version (Created is the caller's).
func NewLockInfo(info LockInfo, version string) LockInfo {
	return fillLockInfo(info, version)
}
