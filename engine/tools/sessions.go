package tools

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/agentctl/agentctl/model"
	"github.com/agentctl/agentctl/sandbox"
)

// Limits of a run's interactive sessions.
const (
	// MaxSessions bounds the sessions a run keeps at once (the Agents
	// SDK's 64); starting one more first drops a finished one, else kills
	// the one unused the longest.
	MaxSessions = 64
	// MaxSessionBuffer bounds the output a session holds between two
	// reads; beyond it the oldest output is dropped, and the next read
	// says how much.
	MaxSessionBuffer = 1 << 20
	// DefaultWriteStdinYield is write_stdin's yield_time_ms default (the
	// SDK's 250 ms).
	DefaultWriteStdinYield = 250 * time.Millisecond
)

// Sessions are one run's interactive processes: commands started on a
// terminal (exec_command with tty) or still running after yield_time_ms,
// which write_stdin drives. Ids are small integers from 1, as Codex's
// are. Close kills them all; a run closes its sessions when it ends, so a
// resumed run starts with none.
type Sessions struct {
	mu     sync.Mutex
	next   int
	before int // ids up to this one belonged to the run before a resume
	live   map[int]*session
	closed bool
}

// NewSessions returns the sessions of a run that has used ids up to
// usedBefore in an earlier attempt (0 for a new run): new ids follow
// them, and those ids are reported as lost with the earlier attempt.
func NewSessions(usedBefore int) *Sessions {
	return &Sessions{next: usedBefore + 1, before: usedBefore, live: map[int]*session{}}
}

// Close kills every session and waits for them to end.
func (s *Sessions) Close() {
	s.mu.Lock()
	s.closed = true
	live := s.live
	s.live = map[int]*session{}
	s.mu.Unlock()
	for _, ss := range live {
		ss.kill()
	}
}

// session is one process and the output it has written since the last
// read.
type session struct {
	id      int
	p       sandbox.Process
	tty     bool
	started time.Time
	timeout time.Duration

	mu       sync.Mutex
	buf      []byte
	dropped  int
	stream   *sandbox.Stream
	lastUsed time.Time
	changed  chan struct{} // closed and replaced when output arrives or the process ends
	done     bool
	code     int
	err      error
	timedOut bool
}

// start runs req in ws as a new session.
func (s *Sessions) start(ctx context.Context, ws *sandbox.Workspace, req sandbox.ProcessRequest, timeout time.Duration) (*session, error) {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil, errors.New("the run is ending: no new session can start")
	}
	s.pruneLocked()
	id := s.next
	s.next++
	s.mu.Unlock()
	// The process outlives this call: it ends with the session, not with
	// the call's context.
	p, err := ws.StartProcess(context.WithoutCancel(ctx), req)
	if err != nil {
		return nil, err
	}
	if !req.TTY {
		// A command without a terminal reads no input, as exec's do.
		p.Stdin().Close()
	}
	now := time.Now()
	ss := &session{id: id, p: p, tty: req.TTY, started: now, timeout: timeout, lastUsed: now, changed: make(chan struct{}), stream: ws.Scrub.NewStream()}
	var readers sync.WaitGroup
	for _, r := range []io.Reader{p.Stdout(), p.Stderr()} {
		readers.Go(func() { ss.read(r) })
	}
	go func() {
		readers.Wait()
		code, err := p.Wait()
		ss.finish(code, err)
	}()
	if timeout > 0 {
		go func() {
			t := time.NewTimer(timeout)
			defer t.Stop()
			select {
			case <-t.C:
				ss.mu.Lock()
				ss.timedOut = !ss.done
				ss.mu.Unlock()
				p.Kill()
			case <-ss.doneCh():
			}
		}()
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		ss.kill()
		return nil, errors.New("the run is ending: no new session can start")
	}
	s.live[id] = ss
	s.mu.Unlock()
	return ss, nil
}

// pruneLocked makes room for one more session: a finished one goes
// first, else the one unused the longest is killed.
func (s *Sessions) pruneLocked() {
	if len(s.live) < MaxSessions {
		return
	}
	ids := make([]int, 0, len(s.live))
	for id := range s.live {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool { return s.live[ids[i]].used().Before(s.live[ids[j]].used()) })
	victim := ids[0]
	for _, id := range ids {
		if s.live[id].finished() {
			victim = id
			break
		}
	}
	ss := s.live[victim]
	delete(s.live, victim)
	go ss.kill()
}

// get returns session id, or an error the model can act on.
func (s *Sessions) get(id int) (*session, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if ss, ok := s.live[id]; ok {
		return ss, nil
	}
	switch {
	case id >= 1 && id <= s.before:
		return nil, fmt.Errorf("session %d ended when this run was interrupted: a resumed run starts with no sessions; start the command again with exec_command", id)
	case id >= 1 && id < s.next:
		return nil, fmt.Errorf("session %d has ended (its process exited and its last output was returned, or it was closed to make room for newer sessions); start the command again with exec_command", id)
	}
	return nil, fmt.Errorf("there is no session %d: use the session ID an exec_command result gave", id)
}

func (s *Sessions) remove(id int) {
	s.mu.Lock()
	delete(s.live, id)
	s.mu.Unlock()
}

func (ss *session) read(r io.Reader) {
	b := make([]byte, 32<<10)
	for {
		n, err := r.Read(b)
		if n > 0 {
			ss.mu.Lock()
			ss.buf = append(ss.buf, ss.stream.Write(string(b[:n]))...)
			if over := len(ss.buf) - MaxSessionBuffer; over > 0 {
				ss.buf = append(ss.buf[:0], ss.buf[over:]...)
				ss.dropped += over
			}
			ss.signalLocked()
			ss.mu.Unlock()
		}
		if err != nil {
			return
		}
	}
}

func (ss *session) finish(code int, err error) {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	ss.buf = append(ss.buf, ss.stream.Flush()...)
	ss.done, ss.code, ss.err = true, code, err
	ss.signalLocked()
}

func (ss *session) signalLocked() {
	close(ss.changed)
	ss.changed = make(chan struct{})
}

func (ss *session) doneCh() <-chan struct{} {
	ch := make(chan struct{})
	go func() {
		for {
			ss.mu.Lock()
			done, changed := ss.done, ss.changed
			ss.mu.Unlock()
			if done {
				close(ch)
				return
			}
			<-changed
		}
	}()
	return ch
}

func (ss *session) used() time.Time {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	return ss.lastUsed
}

func (ss *session) finished() bool {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	return ss.done
}

func (ss *session) kill() {
	ss.p.Kill()
}

// chunk is what one read of a session returns.
type chunk struct {
	output   string
	dropped  int
	exited   bool
	code     int
	timedOut bool
	err      error
}

// collect waits until the process exits or yield has passed (ctx ending
// stops the wait), then takes the output written since the last read.
func (ss *session) collect(ctx context.Context, yield time.Duration) chunk {
	timer := time.NewTimer(yield)
	defer timer.Stop()
	for {
		ss.mu.Lock()
		done, changed := ss.done, ss.changed
		ss.mu.Unlock()
		if done {
			break
		}
		select {
		case <-changed:
			continue
		case <-timer.C:
		case <-ctx.Done():
		}
		break
	}
	ss.mu.Lock()
	defer ss.mu.Unlock()
	c := chunk{output: decodeLossy(ss.buf), dropped: ss.dropped, exited: ss.done, code: ss.code, timedOut: ss.timedOut, err: ss.err}
	ss.buf, ss.dropped = nil, 0
	ss.lastUsed = time.Now()
	return c
}

// format renders a chunk in the exec_command layout, with the session's
// id while it runs.
func (c chunk) format(id int, wall time.Duration, timeout time.Duration, maxTokens int) string {
	var notices []string
	if c.dropped > 0 {
		notices = append(notices, fmt.Sprintf("(%d earlier bytes of output were dropped: a session keeps at most %d bytes between reads)", c.dropped, MaxSessionBuffer))
	}
	if c.timedOut {
		notices = append(notices, TimeoutNotice(timeout))
	}
	res := formatChunk{output: c.output, wall: wall, maxTokens: maxTokens, notices: notices}
	switch {
	case c.exited && !c.timedOut:
		res.exitCode = &c.code
	case !c.exited:
		res.sessionID = id
	}
	return res.String()
}

// writeStdinArgs are write_stdin's arguments, the SDK's WriteStdinArgs.
type writeStdinArgs struct {
	SessionID       *int    `json:"session_id"`
	Chars           *string `json:"chars"`
	YieldTimeMS     *int64  `json:"yield_time_ms"`
	MaxOutputTokens *int    `json:"max_output_tokens"`
}

const writeStdinSchema = `{
  "properties": {
    "session_id": {"description": "Identifier of the running unified exec session.", "title": "Session Id", "type": "integer"},
    "chars": {"default": "", "description": "Bytes to write to stdin (may be empty to poll).", "title": "Chars", "type": "string"},
    "yield_time_ms": {"default": 250, "description": "How long to wait (in milliseconds) for output before yielding.", "minimum": 0, "title": "Yield Time Ms", "type": "integer"},
    "max_output_tokens": {"anyOf": [{"minimum": 1, "type": "integer"}, {"type": "null"}], "default": null, "description": "Maximum number of tokens to return. Excess output will be truncated.", "title": "Max Output Tokens"}
  },
  "required": ["session_id"],
  "title": "WriteStdinArgs",
  "type": "object"
}`

// WriteStdin is the write_stdin tool of the shell capability.
type WriteStdin struct {
	sessions *Sessions
	opts     ExecOptions
}

// NewWriteStdin returns the write_stdin tool over a run's sessions.
func NewWriteStdin(sessions *Sessions, opts ExecOptions) *WriteStdin {
	return &WriteStdin{sessions: sessions, opts: opts}
}

// Definition implements Tool.
func (t *WriteStdin) Definition() model.Tool {
	return model.Tool{
		Name:        "write_stdin",
		Description: "Writes characters to an existing unified exec session and returns recent output.",
		Parameters:  json.RawMessage(writeStdinSchema),
	}
}

// Call implements Tool.
func (t *WriteStdin) Call(ctx context.Context, arguments string) (Output, error) {
	var a writeStdinArgs
	if err := decodeArgs("write_stdin", arguments, &a); err != nil {
		return Output{}, err
	}
	if a.SessionID == nil {
		return Output{}, errors.New(`write_stdin: "session_id" is required: give the session ID an exec_command result reported`)
	}
	if a.YieldTimeMS != nil && *a.YieldTimeMS < 0 {
		return Output{}, fmt.Errorf("write_stdin: yield_time_ms is %d: it must be 0 or more milliseconds", *a.YieldTimeMS)
	}
	if a.MaxOutputTokens != nil && *a.MaxOutputTokens < 1 {
		return Output{}, fmt.Errorf("write_stdin: max_output_tokens is %d: it must be at least 1", *a.MaxOutputTokens)
	}
	start := time.Now()
	ss, err := t.sessions.get(*a.SessionID)
	if err != nil {
		return Output{}, fmt.Errorf("write_stdin: %w", err)
	}
	if a.Chars != nil && *a.Chars != "" {
		if !ss.tty {
			return Output{}, fmt.Errorf("write_stdin: session %d has no terminal, so it reads no input: start the command with tty=true in exec_command to drive it (empty chars polls its output)", ss.id)
		}
		if _, err := io.WriteString(ss.p.Stdin(), *a.Chars); err != nil && !ss.finished() {
			return Output{}, fmt.Errorf("write_stdin: writing to session %d: %w", ss.id, err)
		}
	}
	yield := DefaultWriteStdinYield
	if a.YieldTimeMS != nil {
		yield = time.Duration(*a.YieldTimeMS) * time.Millisecond
	}
	c := ss.collect(ctx, yield)
	if ctx.Err() != nil {
		return Output{}, fmt.Errorf("write_stdin: cancelled: %w", ctx.Err())
	}
	if c.exited {
		t.sessions.remove(ss.id)
	}
	return Output{Text: c.format(ss.id, time.Since(start), ss.timeout, maxTokens(t.opts.MaxOutputTokens, a.MaxOutputTokens))}, nil
}

// maxTokens is the output cap: the capability's, lowered by the call's.
func maxTokens(capability int, call *int) int {
	if call != nil && (capability <= 0 || *call < capability) {
		return *call
	}
	return capability
}

// formatChunk is a tool result in the exec_command layout (see
// FormatExecOutput).
type formatChunk struct {
	output    string
	wall      time.Duration
	exitCode  *int
	sessionID int
	original  int
	maxTokens int
	notices   []string
}

func (f formatChunk) String() string {
	out, original := TruncateTokens(f.output, f.maxTokens)
	if original == 0 {
		original = f.original
	}
	for i := len(f.notices) - 1; i >= 0; i-- {
		if out == "" {
			out = f.notices[i]
		} else {
			out = f.notices[i] + "\n" + out
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "Chunk ID: %s\n", chunkID())
	fmt.Fprintf(&b, "Wall time: %.4f seconds\n", f.wall.Seconds())
	if f.exitCode != nil {
		fmt.Fprintf(&b, "Process exited with code %d\n", *f.exitCode)
	}
	if f.sessionID > 0 {
		fmt.Fprintf(&b, "Process running with session ID %d\n", f.sessionID)
	}
	if original > 0 {
		fmt.Fprintf(&b, "Original token count: %d\n", original)
	}
	b.WriteString("Output:\n")
	b.WriteString(out)
	return b.String()
}

var sessionIDRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`(?m)^Process running with session ID (\d+)$`) })

// SessionIDsUsed is the highest session id the tool results outputs
// (those of an earlier attempt of a run) gave, 0 when none.
func SessionIDsUsed(outputs []string) int {
	n := 0
	for _, out := range outputs {
		for _, m := range sessionIDRE().FindAllStringSubmatch(out, -1) {
			if id, err := strconv.Atoi(m[1]); err == nil && id > n {
				n = id
			}
		}
	}
	return n
}
