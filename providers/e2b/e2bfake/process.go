package e2bfake

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"connectrpc.com/connect"
	"github.com/creack/pty"

	"github.com/agentctl/agentctl/providers/e2b/internal/envd/process"
	"github.com/agentctl/agentctl/providers/e2b/internal/envd/process/processconnect"
)

const (
	stopSignal = syscall.SIGSTOP
	contSignal = syscall.SIGCONT
	killSignal = syscall.SIGKILL
)

// proc is a process envd started.
type proc struct {
	pid    uint32
	cmd    *exec.Cmd
	stdin  io.WriteCloser // nil when the process reads nothing
	tty    *os.File       // the terminal's master side, for PTY processes
	events chan *process.ProcessEvent
}

// signal signals the process and its group (when it leads one).
func (p *proc) signal(sig syscall.Signal) {
	syscall.Kill(-int(p.pid), sig)
	syscall.Kill(int(p.pid), sig)
}

type processService struct {
	processconnect.UnimplementedProcessHandler
	s *Server
}

func (ps *processService) lookup(ctx context.Context, sel *process.ProcessSelector) (*proc, error) {
	b := sandboxOf(ctx)
	ps.s.mu.Lock()
	defer ps.s.mu.Unlock()
	if p := b.procs[sel.GetPid()]; p != nil {
		return p, nil
	}
	return nil, connect.NewError(connect.CodeNotFound, fmt.Errorf("process with pid %d not found", sel.GetPid()))
}

// Start starts a process as envd does: through /bin/sh, as the user the
// request names, streaming its start, its output and its end.
func (ps *processService) Start(ctx context.Context, req *connect.Request[process.StartRequest], stream *connect.ServerStream[process.StartResponse]) error {
	b := sandboxOf(ctx)
	u, err := ps.s.userOf(&http.Request{Header: req.Header()}, b)
	if err != nil {
		return connect.NewError(connect.CodeUnauthenticated, err)
	}
	cfg := req.Msg.GetProcess()
	if ps.s.accountsScript(&http.Request{Header: req.Header()}, b, cfg) {
		stream.Send(&process.StartResponse{Event: &process.ProcessEvent{Event: &process.ProcessEvent_Start{Start: &process.ProcessEvent_StartEvent{Pid: 1}}}})
		return stream.Send(&process.StartResponse{Event: &process.ProcessEvent{Event: &process.ProcessEvent_End{End: &process.ProcessEvent_EndEvent{Exited: true, Status: "exit status 0"}}}})
	}
	p, err := ps.s.startProc(b, req.Msg, u)
	if err != nil {
		return err
	}
	if err := stream.Send(&process.StartResponse{Event: &process.ProcessEvent{Event: &process.ProcessEvent_Start{Start: &process.ProcessEvent_StartEvent{Pid: p.pid}}}}); err != nil {
		go drain(p.events)
		return err
	}
	for {
		select {
		case ev, ok := <-p.events:
			if !ok {
				return nil
			}
			if err := stream.Send(&process.StartResponse{Event: ev}); err != nil {
				go drain(p.events)
				return err
			}
		case <-ctx.Done():
			// The client went away; the process goes on, as in envd.
			go drain(p.events)
			return ctx.Err()
		}
	}
}

func drain(ch <-chan *process.ProcessEvent) {
	for range ch {
	}
}

// startProc starts cfg's command in b.
func (s *Server) startProc(b *fsb, req *process.StartRequest, u *account) (*proc, error) {
	cfg := req.GetProcess()
	cwd := cfg.GetCwd()
	if cwd == "" {
		cwd = s.Root
	}
	if err := s.confine(b, cwd); err != nil {
		return nil, connect.NewError(connect.CodeInvalidArgument, err)
	}
	if fi, err := os.Stat(cwd); err != nil || !fi.IsDir() {
		return nil, connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("cwd '%s' does not exist", cwd))
	}
	// envd's processes inherit its umask, 022.
	cmd := exec.Command("/bin/sh", append([]string{"-c", `umask 022; exec "$@"`, "--", cfg.GetCmd()}, cfg.GetArgs()...)...)
	cmd.Dir = cwd
	cmd.Env = os.Environ()
	for k, v := range b.env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	for k, v := range cfg.GetEnvs() {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{}
	if u != nil {
		if os.Getuid() != 0 {
			return nil, connect.NewError(connect.CodeInternal, errors.New("the fake runs commands as another user only when the test runs as root"))
		}
		cmd.SysProcAttr.Credential = &syscall.Credential{Uid: uint32(u.uid), Gid: uint32(u.uid), Groups: u.groups}
	}
	p := &proc{cmd: cmd, events: make(chan *process.ProcessEvent, 64)}
	var outputs []io.Reader
	var err error
	if req.Pty != nil {
		sz := req.GetPty().GetSize()
		cmd.SysProcAttr.Setsid, cmd.SysProcAttr.Setctty = true, true
		p.tty, err = pty.StartWithAttrs(cmd, &pty.Winsize{Rows: uint16(sz.GetRows()), Cols: uint16(sz.GetCols())}, cmd.SysProcAttr)
		outputs = []io.Reader{p.tty}
	} else {
		outputs, err = pipes(p, req.GetStdin())
		if err == nil {
			err = cmd.Start()
		}
	}
	if err != nil {
		return nil, connect.NewError(connect.CodeInternal, fmt.Errorf("error starting process: %w", err))
	}
	p.pid = uint32(cmd.Process.Pid)
	s.mu.Lock()
	b.procs[p.pid] = p
	s.mu.Unlock()
	go s.run(b, p, outputs)
	return p, nil
}

// pipes connects a process's standard streams: stdin only when asked
// (else it reads nothing), stdout and stderr always.
func pipes(p *proc, stdin bool) ([]io.Reader, error) {
	if stdin {
		w, err := p.cmd.StdinPipe()
		if err != nil {
			return nil, err
		}
		p.stdin = w
	}
	o, err := p.cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	e, err := p.cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	return []io.Reader{o, e}, nil
}

// run passes a process's output on as data events, then its end.
func (s *Server) run(b *fsb, p *proc, outputs []io.Reader) {
	var wg sync.WaitGroup
	for i, r := range outputs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			buf := make([]byte, 32<<10)
			for {
				n, err := r.Read(buf)
				if n > 0 {
					data := append([]byte(nil), buf[:n]...)
					ev := &process.ProcessEvent_DataEvent{Output: &process.ProcessEvent_DataEvent_Stdout{Stdout: data}}
					switch {
					case p.tty != nil:
						ev.Output = &process.ProcessEvent_DataEvent_Pty{Pty: data}
					case i == 1:
						ev.Output = &process.ProcessEvent_DataEvent_Stderr{Stderr: data}
					}
					p.events <- &process.ProcessEvent{Event: &process.ProcessEvent_Data{Data: ev}}
				}
				if err != nil {
					return
				}
			}
		}()
	}
	if p.tty != nil {
		// A terminal's output ends (EIO) only once the process is gone.
		p.cmd.Wait()
		wg.Wait()
	} else {
		wg.Wait()
		p.cmd.Wait()
	}
	st := p.cmd.ProcessState
	p.events <- &process.ProcessEvent{Event: &process.ProcessEvent_End{End: &process.ProcessEvent_EndEvent{
		ExitCode: int32(st.ExitCode()), Exited: st.Exited(), Status: st.String()}}}
	close(p.events)
	if p.tty != nil {
		p.tty.Close()
	}
	s.mu.Lock()
	delete(b.procs, p.pid)
	s.mu.Unlock()
}

func (ps *processService) SendInput(ctx context.Context, req *connect.Request[process.SendInputRequest]) (*connect.Response[process.SendInputResponse], error) {
	p, err := ps.lookup(ctx, req.Msg.GetProcess())
	if err != nil {
		return nil, err
	}
	in := req.Msg.GetInput()
	switch {
	case in.GetPty() != nil && p.tty != nil:
		_, err = p.tty.Write(in.GetPty())
	case in.GetStdin() != nil && p.stdin != nil:
		_, err = p.stdin.Write(in.GetStdin())
	default:
		return nil, connect.NewError(connect.CodeFailedPrecondition, errors.New("the process does not take this input"))
	}
	if err != nil {
		return nil, connect.NewError(connect.CodeInternal, fmt.Errorf("error writing input: %w", err))
	}
	return connect.NewResponse(&process.SendInputResponse{}), nil
}

func (ps *processService) CloseStdin(ctx context.Context, req *connect.Request[process.CloseStdinRequest]) (*connect.Response[process.CloseStdinResponse], error) {
	p, err := ps.lookup(ctx, req.Msg.GetProcess())
	if err != nil {
		return nil, err
	}
	if p.tty != nil || p.stdin == nil {
		return nil, connect.NewError(connect.CodeFailedPrecondition, errors.New("the process has no stdin to close (on a terminal, send Ctrl+D)"))
	}
	p.stdin.Close()
	return connect.NewResponse(&process.CloseStdinResponse{}), nil
}

// SendSignal signals the process alone, as envd does.
func (ps *processService) SendSignal(ctx context.Context, req *connect.Request[process.SendSignalRequest]) (*connect.Response[process.SendSignalResponse], error) {
	p, err := ps.lookup(ctx, req.Msg.GetProcess())
	if err != nil {
		return nil, err
	}
	var sig syscall.Signal
	switch req.Msg.GetSignal() {
	case process.Signal_SIGNAL_SIGKILL:
		sig = syscall.SIGKILL
	case process.Signal_SIGNAL_SIGTERM:
		sig = syscall.SIGTERM
	default:
		return nil, connect.NewError(connect.CodeUnimplemented, fmt.Errorf("invalid signal: %s", req.Msg.GetSignal()))
	}
	p.cmd.Process.Signal(sig)
	return connect.NewResponse(&process.SendSignalResponse{}), nil
}

func (ps *processService) Update(ctx context.Context, req *connect.Request[process.UpdateRequest]) (*connect.Response[process.UpdateResponse], error) {
	p, err := ps.lookup(ctx, req.Msg.GetProcess())
	if err != nil {
		return nil, err
	}
	if p.tty == nil || req.Msg.GetPty() == nil {
		return nil, connect.NewError(connect.CodeFailedPrecondition, errors.New("the process has no terminal"))
	}
	sz := req.Msg.GetPty().GetSize()
	if err := pty.Setsize(p.tty, &pty.Winsize{Rows: uint16(sz.GetRows()), Cols: uint16(sz.GetCols())}); err != nil {
		return nil, connect.NewError(connect.CodeInternal, err)
	}
	return connect.NewResponse(&process.UpdateResponse{}), nil
}

// ---- accounts ----

// The fake's sandboxes share the host, whose accounts a test must never
// change: agentctl's account script, run as root, is recognized and
// carried out here instead, into accounts of the sandbox's own; a
// command run as one of them gets its ids (the test runs as root).

type account struct {
	uid    int
	groups []uint32
}

type accounts struct {
	users  map[string]account
	groups map[string]int
}

// accountsScript carries out agentctl's account script when cfg runs it
// as root, and reports whether it did.
func (s *Server) accountsScript(r *http.Request, b *fsb, cfg *process.ProcessConfig) bool {
	name, _, _ := r.BasicAuth()
	argv := append([]string{cfg.GetCmd()}, cfg.GetArgs()...)
	at := -1
	for i, a := range argv {
		if strings.Contains(a, "useradd") && strings.Contains(a, "adduser") {
			at = i
		}
	}
	if name != "root" || at < 0 || at+2 >= len(argv) {
		return false
	}
	root, entries := argv[at+2], argv[at+3:]
	s.mu.Lock()
	defer s.mu.Unlock()
	if b.accounts == nil {
		b.accounts = &accounts{users: map[string]account{}, groups: map[string]int{}}
	}
	for _, e := range entries {
		f := strings.Fields(e)
		if len(f) < 3 {
			continue
		}
		id, _ := strconv.Atoi(f[2])
		switch f[0] {
		case "u":
			b.accounts.users[f[1]] = account{uid: id, groups: []uint32{uint32(id)}}
		case "g":
			b.accounts.groups[f[1]] = id
			if len(f) > 3 {
				for _, m := range strings.Split(f[3], ",") {
					if u, ok := b.accounts.users[m]; ok {
						u.groups = append(u.groups, uint32(id))
						b.accounts.users[m] = u
					}
				}
			}
		}
	}
	os.Chmod(root, 0o777|os.ModeSticky)
	for d := filepath.Dir(root); d != "/" && d != "/tmp" && d != "."; d = filepath.Dir(d) {
		if fi, err := os.Stat(d); err == nil {
			os.Chmod(d, fi.Mode().Perm()|0o001)
		}
	}
	return true
}
