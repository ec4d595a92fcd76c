//go:build linux

package local

// agentctl's side of the sandbox init: starting it, handing it commands,
// stopping it.

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"runtime"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/agentctl/agentctl/providers/local/internal/nsinit"
	"github.com/agentctl/agentctl/sandbox"
)

// initProc is a running sandbox init.
type initProc struct {
	cmd  *exec.Cmd
	ctl  *net.UnixConn
	done chan struct{} // closed when the init has exited
	// cg is the sandbox's cgroup when it has memory or CPU limits.
	cg *sandboxCgroup
}

func (ip *initProc) alive() bool {
	select {
	case <-ip.done:
		return false
	default:
		return true
	}
}

// kill ends the init, and with it every process of the sandbox, and
// waits for it.
func (ip *initProc) kill() error {
	ip.cmd.Process.Kill()
	<-ip.done
	ip.ctl.Close()
	if ip.cg != nil {
		return ip.cg.remove()
	}
	return nil
}

// errInitGone means the init died before it took the command.
var errInitGone = errors.New("the sandbox's init process is gone")

// init returns the sandbox's running init, starting one if needed.
func (s *Sandbox) init(ctx context.Context) (*initProc, error) {
	s.initMu.Lock()
	defer s.initMu.Unlock()
	if s.ip != nil && s.ip.alive() {
		return s.ip, nil
	}
	if s.ip != nil {
		s.ip.ctl.Close()
		s.ip = nil
	}
	ip, err := s.startInit(ctx)
	if err != nil {
		return nil, err
	}
	s.ip = ip
	return ip, nil
}

// stopInit kills the sandbox's init, if one runs, and removes its cgroup.
func (s *Sandbox) stopInit() error {
	s.initMu.Lock()
	ip := s.ip
	s.ip = nil
	s.initMu.Unlock()
	if ip != nil {
		return ip.kill()
	}
	return nil
}

// discardInit kills ip, a sandbox init found dead or dying, and forgets
// it if it is still the sandbox's.
func (s *Sandbox) discardInit(ip *initProc) {
	s.initMu.Lock()
	if s.ip == ip {
		s.ip = nil
	}
	s.initMu.Unlock()
	ip.kill()
}

// removeCgroup removes the sandbox's cgroup if one is left (agentctl
// ended without stopping the sandbox).
func (s *Sandbox) removeCgroup() error {
	return hostCgroups().remove("agentctl-" + filepath.Base(s.dir))
}

// probe checks that namespaces can be created and the sandbox root built;
// the init it starts serves the sandbox's first commands.
func (s *Sandbox) probe(ctx context.Context) error {
	_, err := s.init(ctx)
	return err
}

func (s *Sandbox) startInit(ctx context.Context) (*initProc, error) {
	exePath, err := s.p.executable()
	if err != nil {
		return nil, err
	}
	exe, err := os.Open(exePath)
	if err != nil {
		return nil, fmt.Errorf("opening the agentctl binary %s: %w", exePath, err)
	}
	defer exe.Close()
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("creating the init's control socket: %w", err)
	}
	parentSock := os.NewFile(uintptr(fds[0]), "sandbox-init-parent")
	childSock := os.NewFile(uintptr(fds[1]), "sandbox-init-child")
	defer parentSock.Close()
	defer childSock.Close()

	mode, err := currentIDMode()
	if err != nil {
		return nil, err
	}
	// root: this process may map several ids and let the sandbox's root
	// set its groups; hostRoot: the sandbox's root is HostID, and the
	// workspace comes as idmapped mounts.
	root, hostRoot := mode != idsUser, mode == idsHostRoot
	uid, gid := os.Getuid(), os.Getgid()
	if hostRoot {
		uid, gid = s.p.opts.HostID, s.p.opts.HostID
	}
	flags := uintptr(unix.CLONE_NEWUSER | unix.CLONE_NEWNS | unix.CLONE_NEWPID | unix.CLONE_NEWIPC | unix.CLONE_NEWUTS)
	hostNet := s.spec.Network == "host"
	if !hostNet {
		flags |= unix.CLONE_NEWNET
	}
	// The binary is executed through its descriptor: the sandbox uid may
	// not be allowed to traverse the directories it lives in.
	cmd := exec.Command("/proc/self/fd/3")
	cmd.Args = []string{"agentctl-sandbox-init"}
	cmd.Env = []string{nsinit.Env + "=4", "GOMAXPROCS=1"}
	cmd.Dir = "/"
	cmd.ExtraFiles = []*os.File{exe, childSock}
	uidMap, gidMap := idMappings(uid, gid, s.spec.Accounts)
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Cloneflags:                 flags,
		UidMappings:                uidMap,
		GidMappings:                gidMap,
		GidMappingsEnableSetgroups: root,
		// As root, drop the host's supplementary groups (root's group
		// would otherwise still grant access).
		Credential: &syscall.Credential{Uid: 0, Gid: 0, NoSetGroups: !root},
		Pdeathsig:  syscall.SIGKILL,
	}
	ip := &initProc{cmd: cmd, done: make(chan struct{})}
	if l := limitsOf(s.spec.Resources); len(l.controllers()) > 0 {
		cg, err := hostCgroups().create("agentctl-"+filepath.Base(s.dir), l)
		if err != nil {
			return nil, fmt.Errorf("enforcing resources: %w", err)
		}
		ip.cg = cg
	}
	started := make(chan error, 1)
	go func() {
		// PR_SET_PDEATHSIG fires when the thread that started the init
		// exits, not the process: this goroutine keeps its thread for as
		// long as the init lives.
		runtime.LockOSThread()
		if err := cmd.Start(); err != nil {
			started <- err
			return
		}
		started <- nil
		cmd.Wait()
		close(ip.done)
	}()
	if err := <-started; err != nil {
		if ip.cg != nil {
			ip.cg.remove()
		}
		return nil, namespaceError(err, s.p.opts.HostID)
	}
	childSock.Close()
	fail := func(err error) (*initProc, error) {
		cmd.Process.Kill()
		<-ip.done
		if ip.ctl != nil {
			ip.ctl.Close()
		}
		if ip.cg != nil {
			ip.cg.remove()
		}
		return nil, err
	}
	// The init waits for its configuration before it runs anything: it
	// joins the cgroup first, and every process of the sandbox with it.
	if ip.cg != nil {
		if err := ip.cg.add(cmd.Process.Pid); err != nil {
			return fail(fmt.Errorf("enforcing resources: %w", err))
		}
	}
	ip.ctl, err = fileConn(parentSock)
	if err != nil {
		return fail(fmt.Errorf("the init's control socket: %w", err))
	}
	// Cancellation while the root is built kills the init.
	defer context.AfterFunc(ctx, func() { cmd.Process.Kill() })()

	cfg := nsinit.Config{
		Root: s.spec.Root, HostNet: hostNet, MountFDs: hostRoot, ReadOnly: s.p.opts.ReadOnlyPaths,
		PIDs: s.spec.Resources.PIDs, Mounts: nsMounts(s.spec.Root, s.spec.Mounts),
	}
	cfg.Passwd, cfg.Group = accountFiles(s.spec.Root, s.spec.Accounts)
	if cfg.PIDs <= 0 {
		cfg.PIDs = DefaultPIDs
	}
	if !hostRoot {
		cfg.WorkspacePath, cfg.TmpPath = s.ws, s.tmp
	}
	sendErr := s.sendConfig(ip, cfg, hostRoot)
	if sendErr != nil {
		// The init would wait for its configuration forever.
		cmd.Process.Kill()
	}
	b := make([]byte, 1)
	n, _ := ip.ctl.Read(b)
	if sendErr == nil && n == 1 && b[0] == nsinit.ReadyByte {
		return ip, nil
	}
	rest, _ := io.ReadAll(io.LimitReader(ip.ctl, 64<<10))
	msg := append(b[:n], rest...)
	ip.kill()
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	var st nsinit.Status
	if len(msg) > 0 && json.Unmarshal(msg, &st) == nil && st.Error != "" {
		return nil, s.setupError(errors.New(st.Error))
	}
	// A program that exits by itself without a word (rather than being
	// killed above) is not the init; its exit may also be why sending
	// failed.
	exitedItself := cmd.ProcessState != nil && cmd.ProcessState.Exited()
	if sendErr != nil && !exitedItself && !errors.Is(sendErr, syscall.EPIPE) && !errors.Is(sendErr, syscall.ECONNRESET) {
		return nil, s.setupError(sendErr)
	}
	code := -1
	if cmd.ProcessState != nil {
		code = cmd.ProcessState.ExitCode()
	}
	return nil, fmt.Errorf("%s did not act as the sandbox init (exit code %d): the program's main must call local.MaybeRunInit() before anything else", exePath, code)
}

// idMappings are the sandbox's user namespace mappings: its root is
// uid/gid, and each manifest user and group id N is id uid+N (gid+N) of
// agentctl's namespace: a range no host account uses when agentctl runs
// as the host's root (uid is then Options.HostID), id N itself as root
// of a user namespace (uid 0); an ordinary user maps no accounts
// (checkAccounts).
func idMappings(uid, gid int, a sandbox.Accounts) (uidMap, gidMap []syscall.SysProcIDMap) {
	uidMap = []syscall.SysProcIDMap{{ContainerID: 0, HostID: uid, Size: 1}}
	gidMap = []syscall.SysProcIDMap{{ContainerID: 0, HostID: gid, Size: 1}}
	for _, u := range a.Users {
		uidMap = append(uidMap, syscall.SysProcIDMap{ContainerID: u.UID, HostID: uid + u.UID, Size: 1})
		gidMap = append(gidMap, syscall.SysProcIDMap{ContainerID: u.UID, HostID: gid + u.UID, Size: 1})
	}
	for _, g := range a.Groups {
		gidMap = append(gidMap, syscall.SysProcIDMap{ContainerID: g.GID, HostID: gid + g.GID, Size: 1})
	}
	return uidMap, gidMap
}

// sendConfig sends the init its configuration, with the idmapped
// workspace and /tmp mounts when agentctl runs as root.
func (s *Sandbox) sendConfig(ip *initProc, cfg nsinit.Config, root bool) error {
	var rights []int
	if root {
		for _, dir := range []string{s.ws, s.tmp} {
			fd, err := idmappedMount(ip.cmd.Process.Pid, dir)
			if err != nil {
				return err
			}
			defer unix.Close(fd)
			rights = append(rights, fd)
		}
		// Storage mounts: clones of the host's mounts, moved into place
		// by the init (nsinit.Config.Mounts).
		for _, m := range s.spec.Mounts {
			fd, err := unix.OpenTree(unix.AT_FDCWD, m.HostDir, unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC)
			if err != nil {
				return fmt.Errorf("cloning the storage mount at %s: %w", m.Path, err)
			}
			defer unix.Close(fd)
			rights = append(rights, fd)
		}
	}
	body, err := json.Marshal(cfg)
	if err != nil {
		return err
	}
	var hdr [8]byte
	binary.LittleEndian.PutUint64(hdr[:], uint64(len(body)))
	var oob []byte
	if len(rights) > 0 {
		oob = unix.UnixRights(rights...)
	}
	if _, _, err := ip.ctl.WriteMsgUnix(hdr[:], oob, nil); err != nil {
		return fmt.Errorf("sending the sandbox configuration: %w", err)
	}
	if _, err := ip.ctl.Write(body); err != nil {
		return fmt.Errorf("sending the sandbox configuration: %w", err)
	}
	return nil
}

// killWait bounds how long a killed command's namespace may take to go
// away before the whole init is killed instead.
const killWait = 10 * time.Second

func (s *Sandbox) runNamespaced(ctx context.Context, run *execRun) (sandbox.ExecResult, error) {
	stdout, stderr := sandbox.NewHeadTail(run.outputLimit), sandbox.NewHeadTail(run.outputLimit)
	start := time.Now()
	st, timedOut, err := s.execInInit(ctx, run, stdout, stderr)
	return sandbox.CapturedResult(stdout, stderr, st.Code, time.Since(start), timedOut), err
}

// startNamespaced starts run through the init with its streams attached.
func (s *Sandbox) startNamespaced(ctx context.Context, run *execRun) (sandbox.Process, error) {
	return sandbox.StartStreamed(ctx, func(ctx context.Context, stdin io.Reader, stdout, stderr io.Writer) (int, error) {
		r := *run
		r.stdin = stdin
		st, _, err := s.execInInit(ctx, &r, stdout, stderr)
		return st.Code, err
	}), nil
}

// execInInit runs one command through the init, starting (or, if it
// died, restarting) the init first.
func (s *Sandbox) execInInit(ctx context.Context, run *execRun, stdout, stderr io.Writer) (nsinit.ExecStatus, bool, error) {
	for attempt := 0; ; attempt++ {
		ip, err := s.init(ctx)
		if err != nil {
			return nsinit.ExecStatus{Code: -1}, false, err
		}
		st, timedOut, err := s.execOnce(ctx, ip, run, stdout, stderr)
		if errors.Is(err, errInitGone) {
			// Make sure it is gone, so the next attempt starts a new one.
			s.discardInit(ip)
			if attempt == 0 && ctx.Err() == nil && s.running() {
				continue
			}
			err = sandbox.MarkUnavailable(err)
		}
		return st, timedOut, err
	}
}

func (s *Sandbox) execOnce(ctx context.Context, ip *initProc, run *execRun, stdout, stderr io.Writer) (nsinit.ExecStatus, bool, error) {
	failed := nsinit.ExecStatus{Code: -1}
	req, err := s.execRequest(run)
	if err != nil {
		return failed, false, err
	}
	conn, err := openExec(ip)
	if err != nil {
		return failed, false, err
	}
	defer conn.Close()
	cio, err := sendRequest(ctx, conn, run, req, stdout, stderr)
	if err != nil {
		return failed, false, err
	}
	if cio.feed != nil {
		go func() {
			io.Copy(cio.feed, run.stdin)
			if !run.tty {
				// EOF for a pipe; a terminal stays open until the command ends.
				cio.feed.Close()
			}
		}()
	}
	drained := make(chan struct{}, len(cio.drains))
	for _, d := range cio.drains {
		go func() {
			io.Copy(d.w, d.r)
			drained <- struct{}{}
		}()
	}
	answer := make(chan []byte, 1)
	go func() {
		b, _ := io.ReadAll(io.LimitReader(cio.answer, nsinit.MaxMessage))
		answer <- b
	}()
	tctx, cancel, timedOut := withTimeout(ctx, run.timeout)
	defer cancel()
	var msg []byte
	select {
	case msg = <-answer:
	case <-tctx.Done():
		// Kill the command's namespace and wait until it is gone.
		conn.Write([]byte{nsinit.KillByte})
		select {
		case msg = <-answer:
		case <-time.After(killWait):
			s.stopInit()
			msg = <-answer
		}
	}
	cio.finish(drained)
	return s.execStatus(ctx, run, msg, timedOut)
}

// execRequest is run as the init's request.
func (s *Sandbox) execRequest(run *execRun) (nsinit.ExecRequest, error) {
	req := nsinit.ExecRequest{Argv: run.argv, Env: envList(run.env), Dir: path.Join(s.spec.Root, run.dir), TTY: run.tty}
	if run.tty {
		rows, cols := run.rows, run.cols
		if rows <= 0 || cols <= 0 {
			rows, cols = sandbox.DefaultTTYRows, sandbox.DefaultTTYCols
		}
		if rows > 0xffff || cols > 0xffff {
			return req, fmt.Errorf("a terminal of %d rows and %d columns is too large (at most 65535 each)", rows, cols)
		}
		req.Rows, req.Cols = uint16(rows), uint16(cols)
	}
	if run.user != "" {
		// The manifest user's ids (checked against the manifest before).
		uid, gid, groups, err := s.spec.Accounts.Lookup(run.user)
		if err != nil {
			return req, err
		}
		req.Cred = &nsinit.Credentials{UID: uid, GID: gid, Groups: groups}
	}
	return req, nil
}

// openExec hands the init a new connection for one command.
func openExec(ip *initProc) (*net.UnixConn, error) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("creating the command's socket: %w", err)
	}
	conn, err := fileConn(os.NewFile(uintptr(fds[0]), "sandbox-exec"))
	if err != nil {
		unix.Close(fds[1])
		return nil, fmt.Errorf("the command's socket: %w", err)
	}
	_, _, err = ip.ctl.WriteMsgUnix([]byte{'C'}, unix.UnixRights(fds[1]), nil)
	unix.Close(fds[1])
	if err != nil {
		conn.Close()
		return nil, fmt.Errorf("%w (%v)", errInitGone, err)
	}
	return conn, nil
}

// commandIO are the host ends of a command's streams and the init's
// answer.
type commandIO struct {
	drains []drain
	// feed is the end the command's stdin is fed through (nil: the
	// command reads /dev/null).
	feed *os.File
	tty  bool
	// answer is the rest of the init's answer on the connection.
	answer io.Reader
}

// finish drains what is left of the output once everything holding the
// command's streams is dead, and closes the host ends.
func (c *commandIO) finish(drained <-chan struct{}) {
	grace := time.NewTimer(ioGrace)
	defer grace.Stop()
	for range c.drains {
		select {
		case <-drained:
		case <-grace.C:
			for _, d := range c.drains {
				d.r.Close()
			}
			<-drained
		}
	}
	for _, d := range c.drains {
		closeFiles(d.r)
	}
	if c.tty {
		closeFiles(c.feed)
	}
}

// sendRequest sends req on conn: with a terminal, the init opens it in
// the sandbox and sends its controlling side back, through which the
// command's output is read and its input fed; otherwise with the
// command's stdin (/dev/null or a pipe to feed) and stdout and stderr
// (pipes to drain).
func sendRequest(ctx context.Context, conn *net.UnixConn, run *execRun, req nsinit.ExecRequest, stdout, stderr io.Writer) (*commandIO, error) {
	body, err := json.Marshal(req)
	if err != nil {
		return nil, err
	}
	var hdr [8]byte
	binary.LittleEndian.PutUint64(hdr[:], uint64(len(body)))
	if run.tty {
		if err := writeRequest(conn, hdr[:], nil, body); err != nil {
			return nil, err
		}
		ptmx, answer := receiveTerminal(ctx, conn)
		cio := &commandIO{tty: true, answer: answer}
		if ptmx != nil {
			cio.drains = []drain{{r: ptmx, w: stdout}}
			if run.stdin != nil {
				cio.feed = ptmx
			}
		}
		return cio, nil
	}
	stdio, drains, feed, err := commandPipes(run, stdout, stderr)
	if err != nil {
		return nil, err
	}
	err = writeRequest(conn, hdr[:], unix.UnixRights(int(stdio[0].Fd()), int(stdio[1].Fd()), int(stdio[2].Fd())), body)
	closeFiles(stdio[:]...)
	if err != nil {
		closeFiles(feed)
		for _, d := range drains {
			closeFiles(d.r)
		}
		return nil, err
	}
	return &commandIO{drains: drains, feed: feed, answer: conn}, nil
}

// writeRequest writes a request's header, with descriptors oob, and its
// body.
func writeRequest(conn *net.UnixConn, hdr, oob, body []byte) error {
	_, _, err := conn.WriteMsgUnix(hdr, oob, nil)
	if err == nil {
		_, err = conn.Write(body)
	}
	if err != nil {
		return fmt.Errorf("%w (%v)", errInitGone, err)
	}
	return nil
}

// receiveTerminal reads the start of the init's answer to a request for
// a terminal: PtyByte, with the terminal's controlling side. An answer
// that does not start so (the init could not open a terminal, or died)
// is returned whole, with no terminal.
func receiveTerminal(ctx context.Context, conn *net.UnixConn) (*os.File, io.Reader) {
	stop := context.AfterFunc(ctx, func() { conn.SetReadDeadline(time.Now()) })
	defer stop()
	b := make([]byte, 1)
	oob := make([]byte, unix.CmsgSpace(4))
	n, oobn, _, _, _ := conn.ReadMsgUnix(b, oob)
	var fds []int
	if msgs, err := unix.ParseSocketControlMessage(oob[:oobn]); err == nil {
		for _, m := range msgs {
			if r, err := unix.ParseUnixRights(&m); err == nil {
				fds = append(fds, r...)
			}
		}
	}
	if n == 1 && b[0] == nsinit.PtyByte && len(fds) == 1 {
		unix.CloseOnExec(fds[0])
		// Served by the runtime's poller, so that closing it ends a read.
		unix.SetNonblock(fds[0], true)
		return os.NewFile(uintptr(fds[0]), "sandbox-terminal"), conn
	}
	for _, fd := range fds {
		unix.Close(fd)
	}
	return nil, io.MultiReader(bytes.NewReader(b[:n]), conn)
}

// execStatus reads the init's answer msg about run.
func (s *Sandbox) execStatus(ctx context.Context, run *execRun, msg []byte, timedOut func() bool) (nsinit.ExecStatus, bool, error) {
	failed := nsinit.ExecStatus{Code: -1}
	started := len(msg) > 0 && msg[0] == nsinit.StartedByte
	if started {
		msg = msg[1:]
	}
	var st nsinit.ExecStatus
	if len(msg) == 0 || json.Unmarshal(msg, &st) != nil {
		switch {
		case ctx.Err() != nil:
			return failed, false, ctx.Err()
		case !started:
			// It never took the command: safe to run it again.
			return failed, false, fmt.Errorf("%w before it started %s", errInitGone, run.argv[0])
		}
		return failed, false, sandbox.MarkUnavailable(fmt.Errorf("the sandbox's init process died while running %s", run.argv[0]))
	}
	if st.Error != "" {
		return failed, false, s.setupError(errors.New(st.Error))
	}
	if st.Killed {
		if ctx.Err() != nil {
			return st, false, ctx.Err()
		}
		if timedOut() {
			return st, true, nil
		}
	}
	return st, false, nil
}

// drain copies what a command writes to a host end.
type drain struct {
	r *os.File
	w io.Writer
}

// commandPipes makes the descriptors of a command without a terminal:
// stdin /dev/null or a pipe fed through feed, stdout and stderr pipes
// to drain. stdio are to be closed once passed to the init.
func commandPipes(run *execRun, stdout, stderr io.Writer) (stdio [3]*os.File, drains []drain, feed *os.File, err error) {
	var stdinR, stdinW *os.File
	if run.stdin == nil {
		if stdinR, err = os.Open(os.DevNull); err != nil {
			return stdio, nil, nil, err
		}
	} else if stdinR, stdinW, err = os.Pipe(); err != nil {
		return stdio, nil, nil, err
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		closeFiles(stdinR, stdinW)
		return stdio, nil, nil, err
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		closeFiles(stdinR, stdinW, outR, outW)
		return stdio, nil, nil, err
	}
	return [3]*os.File{stdinR, outW, errW}, []drain{{r: outR, w: stdout}, {r: errR, w: stderr}}, stdinW, nil
}

func closeFiles(fs ...*os.File) {
	for _, f := range fs {
		if f != nil {
			f.Close()
		}
	}
}
