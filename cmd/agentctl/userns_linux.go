//go:build linux

package main

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/agentctl/agentctl/config"
	"github.com/agentctl/agentctl/internal/telemetry"
	"github.com/agentctl/agentctl/internal/userns"
	"github.com/agentctl/agentctl/providers/registry"
)

// userNamespace runs the whole command again in a user namespace of its
// own, in which agentctl is root and ids 1 to N are the user's
// subordinate ids, when the configuration needs it (a sandbox whose
// settings say so, registry.UserNamespacer: an ordinary user's local
// sandbox with manifest users), and returns its exit status as an
// exitCode; ran is false when the command goes on in this process. As a
// shell does, the command runs in a process group of its own, given the
// terminal while it runs when agentctl has it; the signals agentctl gets
// are passed on, once (waitJob says what a Ctrl-Z does).
func (m *meta) userNamespace(cfg *config.Config) (ran bool, err error) {
	if m.self == nil {
		return false, nil
	}
	need := false
	for _, si := range cfg.SandboxInstances {
		if u, ok := si.Settings.(registry.UserNamespacer); ok && u.NeedsUserNamespace() {
			need = true
			break
		}
	}
	if !need {
		return false, nil
	}
	mp, err := userns.Lookup(1) // validation checked the ids against the ranges
	if err != nil {
		return true, err
	}
	m.log.Debug("running the command again in a user namespace of its own", "subuid", mp.SubUID, "subgid", mp.SubGID)
	cmd := exec.Command(m.self.exe, m.self.args...)
	cmd.Args[0] = os.Args[0]
	cmd.Dir = m.self.dir
	// Its spans descend from this command's span (agentctl apply).
	cmd.Env = telemetry.WithContext(m.ctx, m.Environ)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	foreground := false
	if pgrp, err := unix.IoctlGetInt(0, unix.TIOCGPGRP); err == nil && pgrp == unix.Getpgrp() {
		foreground = true
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Foreground: foreground, Ctty: 0}
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT)
	defer signal.Stop(sigs)
	// Taking the terminal back afterwards, from the background.
	signal.Ignore(syscall.SIGTTOU)
	defer signal.Reset(syscall.SIGTTOU)
	runtime.LockOSThread() // the command dies with this thread (userns.Start)
	defer runtime.UnlockOSThread()
	if err := userns.Start(cmd, mp); err != nil {
		return true, fmt.Errorf("running agentctl in a user namespace that maps the subordinate ids of %s, for the manifest users of a local sandbox: %w", mp.User, err)
	}
	done := make(chan struct{})
	go func() {
		for {
			select {
			case s := <-sigs:
				cmd.Process.Signal(s)
			case <-done:
				return
			}
		}
	}()
	ws, werr := waitJob(cmd.Process.Pid, foreground)
	close(done)
	if foreground {
		unix.IoctlSetPointerInt(0, unix.TIOCSPGRP, unix.Getpgrp())
	}
	switch {
	case werr != nil:
		return true, fmt.Errorf("agentctl in its user namespace: %w", werr)
	case ws.Signaled():
		// It could not say so itself.
		m.view().Error(fmt.Errorf("agentctl, run again in a user namespace of its own, was killed by signal %d (%v) before it finished; what it checkpointed is in the state, and the next apply resumes from there", int(ws.Signal()), ws.Signal()))
		return true, exitCode(128 + int(ws.Signal()))
	default:
		return true, exitCode(ws.ExitStatus())
	}
}

// waitJob waits for the command's process pid to end, as a shell waits
// for a job: when it is stopped (Ctrl-Z on its terminal), agentctl takes
// the terminal back and stops its own process group, so that the shell
// sees its job stopped and has its terminal again (rather than a terminal
// held by a stopped process group); when agentctl is continued (fg), so
// is the command, given the terminal again if agentctl has it.
func waitJob(pid int, foreground bool) (syscall.WaitStatus, error) {
	for {
		var ws syscall.WaitStatus
		_, err := syscall.Wait4(pid, &ws, syscall.WUNTRACED, nil)
		if errors.Is(err, syscall.EINTR) {
			continue
		}
		if err != nil || !ws.Stopped() {
			return ws, err
		}
		if foreground {
			unix.IoctlSetPointerInt(0, unix.TIOCSPGRP, unix.Getpgrp())
		}
		// The whole job stops (agentctl's process group: a pipeline's
		// other commands too), so that its shell sees it stopped.
		unix.Kill(0, unix.SIGTSTP)
		if pgrp, err := unix.IoctlGetInt(0, unix.TIOCGPGRP); foreground && err == nil && pgrp == unix.Getpgrp() {
			unix.IoctlSetPointerInt(0, unix.TIOCSPGRP, pid)
		}
		unix.Kill(-pid, unix.SIGCONT)
	}
}
