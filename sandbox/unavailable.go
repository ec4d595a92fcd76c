package sandbox

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// UnavailableError reports that a call failed because its sandbox
// stopped, vanished or could not be reached while the call ran: an
// infrastructure failure, not a tool failure (a non-zero exit, bad
// arguments, a missing file). The runtime ends the run on it instead of
// showing it to the model, and does not record the call, so the run stays
// resumable and its next attempt executes the call again.
type UnavailableError struct {
	// Address is the sandbox's address (sandbox.NAME); empty when the
	// workspace has none.
	Address string
	// Status is what the provider reported after the failure: stopped,
	// missing, running (the call was lost although the sandbox is up,
	// such as a local sandbox whose init died), or "" when the provider
	// could not be asked.
	Status Status
	// Err is the call's failure.
	Err error
}

func (e *UnavailableError) Error() string { return e.Err.Error() }
func (e *UnavailableError) Unwrap() error { return e.Err }

// Name is the sandbox's address, or "the sandbox" when it has none.
func (e *UnavailableError) Name() string {
	if e.Address == "" {
		return "the sandbox"
	}
	return e.Address
}

// What says what happened to the sandbox, to follow its Name: "stopped",
// "was deleted", "could not be reached" or "failed".
func (e *UnavailableError) What() string {
	switch {
	case e.Status == StatusMissing:
		return "was deleted"
	case e.Status == StatusStopped:
		return "stopped"
	case e.Status == "":
		return "could not be reached"
	}
	return "failed"
}

// Unavailable classifies err, the failure of a call on the workspace's
// sandbox: it returns an *UnavailableError wrapping err when the sandbox
// itself failed under the call (the provider now reports the sandbox
// stopped or missing, or cannot be asked, or err wraps ErrUnavailable),
// and err unchanged otherwise: a tool failure, nil, or any error once ctx
// is done (a cancelled run is not the sandbox's fault). The provider is
// asked rather than trusted from err alone, since errors such as a 404
// for a file may look like a missing sandbox.
//
// Tools call it on the errors of the sandbox operations they make through
// w.Sandbox; the Workspace's own methods already do.
func (w *Workspace) Unavailable(ctx context.Context, err error) error {
	if err == nil || ctx.Err() != nil {
		return err
	}
	if _, ok := errors.AsType[*UnavailableError](err); ok {
		return err
	}
	status, rerr := w.Sandbox.Refresh(ctx)
	switch {
	case rerr == nil:
	case ctx.Err() != nil:
		return err
	case errors.Is(rerr, ErrNotFound):
		status = StatusMissing
	default:
		return &UnavailableError{Address: w.Address, Err: fmt.Errorf("%w (asking the provider about the sandbox failed too: %v)", err, rerr)}
	}
	if status == StatusRunning && !errors.Is(err, ErrUnavailable) {
		return err
	}
	return &UnavailableError{Address: w.Address, Status: status, Err: err}
}

// settleTimeout bounds how long Exec waits, after a command died of a
// signal, for the provider to report whether the sandbox stopped under it
// (a container's state changes a moment after its processes are killed).
const settleTimeout = 2 * time.Second

// killedBySignal reports an exit status that a signal may have caused: no
// status at all, or 128+N for signal N, as shells and containers report.
func killedBySignal(res ExecResult) bool {
	return !res.TimedOut && (res.ExitCode < 0 || (res.ExitCode > 128 && res.ExitCode <= 128+64))
}

// stoppedUnder checks, after a command died of a signal, whether the
// sandbox stopped or vanished: the command was then killed by the sandbox
// going away, not by what it did. It returns nil when the sandbox is still
// running once settleTimeout has passed.
func (w *Workspace) stoppedUnder(ctx context.Context, res ExecResult) error {
	killed := fmt.Errorf("the command was killed (exit status %d)", res.ExitCode)
	deadline := time.NewTimer(settleTimeout)
	defer deadline.Stop()
	for {
		status, err := w.Sandbox.Refresh(ctx)
		switch {
		case ctx.Err() != nil:
			return nil
		case errors.Is(err, ErrNotFound):
			status = StatusMissing
		case err != nil:
			return &UnavailableError{Address: w.Address, Err: fmt.Errorf("%w, and asking the provider about the sandbox failed: %v", killed, err)}
		}
		if status != StatusRunning {
			return &UnavailableError{Address: w.Address, Status: status, Err: fmt.Errorf("%w: the provider reports the sandbox %s", killed, status)}
		}
		select {
		case <-ctx.Done():
			return nil
		case <-deadline.C:
			return nil
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// MarkUnavailable returns err, with its message unchanged, marked as
// matching ErrUnavailable: for providers reporting a sandbox that is
// stopped or lost under a call. nil stays nil.
func MarkUnavailable(err error) error {
	if err == nil {
		return nil
	}
	return unavailableMark{err}
}

type unavailableMark struct{ err error }

func (e unavailableMark) Error() string        { return e.err.Error() }
func (e unavailableMark) Unwrap() error        { return e.err }
func (e unavailableMark) Is(target error) bool { return target == ErrUnavailable }
