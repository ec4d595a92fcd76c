package engine

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"syscall"
	"time"

	"github.com/agentctl/agentctl/config"
	"github.com/agentctl/agentctl/engine/agentloop"
	"github.com/agentctl/agentctl/sandbox"
)

// Hooks (config.Hook) are host commands run in the configuration
// directory, never in a sandbox, each given its event as JSON on standard
// input with every sensitive value scrubbed, in its own process group,
// killed whole when its timeout passes. A tool_start hook that fails
// (non-zero exit, timeout, or a command that cannot start) blocks the
// call: the model gets the hook's standard error as the call's output.
// Any other hook's failure is reported (a warning event, and the journal's
// record of the hook) and the run goes on: those hooks observe, they do
// not gate. Each event's hooks are journaled when they ran, so a resumed
// run does not run them again.

// hookOutputLimit bounds what is kept of a hook's standard error.
const hookOutputLimit = 16 << 10

// hookRunner runs the hooks of one run's events.
type hookRunner struct {
	cfg   *config.Config
	ri    *config.RunInstance
	run   string // the run's address, in the event
	scrub *sandbox.Scrubber
	warn  func(msg string)
}

// hookPayload is the JSON a hook reads: the event and the run's address.
type hookPayload struct {
	Run string `json:"run"`
	agentloop.HookEvent
	Status string `json:"status,omitempty"` // run_end
}

// runHooks runs the hooks of ev (agentloop.Runner.Hook).
func (h *hookRunner) runHooks(ctx context.Context, ev agentloop.HookEvent) (agentloop.HookResult, error) {
	return h.runEvent(ctx, ev, "")
}

func (h *hookRunner) runEvent(ctx context.Context, ev agentloop.HookEvent, status string) (agentloop.HookResult, error) {
	var res agentloop.HookResult
	hooks := h.cfg.HooksFor(h.ri, ev.Agent, ev.Event)
	if len(hooks) == 0 {
		return res, nil
	}
	res.Ran = true
	payload, err := json.Marshal(hookPayload{Run: h.run, HookEvent: ev, Status: status})
	if err != nil {
		return res, err
	}
	payload = scrubJSON(h.scrub, payload)
	var failed []string
	for _, hk := range hooks {
		stderr, err := runHook(ctx, h.cfg.Dir, hk, payload)
		if ctx.Err() != nil {
			return res, ctx.Err()
		}
		if err == nil {
			continue
		}
		stderr = h.scrub.String(stderr)
		where := fmt.Sprintf("%s:%d", hk.DeclRange.Filename, hk.DeclRange.Start.Line)
		if ev.Event == "tool_start" {
			res.Block = true
			res.Message = strings.TrimSpace(stderr)
			if res.Message == "" {
				res.Message = fmt.Sprintf("error: the tool_start hook %s refused this call (%v)", hk.Command[0], err)
			}
			return res, nil
		}
		msg := fmt.Sprintf("%s: the %s hook %s (%s) failed: %v", h.run, ev.Event, hk.Command[0], where, err)
		if s := strings.TrimSpace(stderr); s != "" {
			msg += ": " + s
		}
		failed = append(failed, msg)
		h.warn(msg)
	}
	res.Failed = strings.Join(failed, "; ")
	return res, nil
}

// runHook runs one hook with payload on its standard input and returns
// its standard error; the error says how it failed.
func runHook(ctx context.Context, dir string, hk *config.Hook, payload []byte) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, hk.Timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, hk.Command[0], hk.Command[1:]...)
	cmd.Dir = dir
	cmd.Stdin = bytes.NewReader(payload)
	stderr := &limitedBuffer{max: hookOutputLimit}
	cmd.Stderr = stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = time.Second
	err := cmd.Run()
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return stderr.String(), fmt.Errorf("timed out after %s and was killed", hk.Timeout)
	}
	return stderr.String(), err
}

// limitedBuffer keeps the first max bytes written to it.
type limitedBuffer struct {
	bytes.Buffer
	max int
}

func (b *limitedBuffer) Write(p []byte) (int, error) {
	if room := b.max - b.Len(); room > 0 {
		b.Buffer.Write(p[:min(len(p), room)])
	}
	return len(p), nil
}

// runEndHooks runs the run's run_end hooks once it has ended (completed
// or failed), unless its journal says they ran; their run is journaled.
func (x *runExec) runEndHooks(ctx context.Context, h *hookRunner) {
	if x.status != RunCompleted && x.status != RunFailed || len(x.e.Config.HooksFor(x.ri, "", "run_end")) == 0 {
		return
	}
	for _, s := range x.history {
		if s.Kind == agentloop.StepHook && s.Hook != nil && s.Hook.Key == "run_end" {
			return
		}
	}
	res, err := h.runEvent(ctx, agentloop.HookEvent{Event: "run_end"}, x.status)
	if err != nil {
		return // cancelled: the run's next attempt runs them
	}
	rec := &agentloop.HookRecord{Key: "run_end", Event: "run_end", Failed: res.Failed}
	if err := x.journal.Append(agentloop.Step{Kind: agentloop.StepHook, Hook: rec}); err != nil {
		h.warn(fmt.Sprintf("%s: recording that its run_end hooks ran: %v", x.addr, err))
	}
}

// hooks is the run's hook runner; its warnings are apply events.
func (x *runExec) hooks() *hookRunner {
	return &hookRunner{cfg: x.e.Config, ri: x.ri, run: x.addr, scrub: x.scrub, warn: func(msg string) {
		x.e.emit(Event{Type: EventApplyProgress, Address: x.addr, Message: "Warning: " + msg})
	}}
}
