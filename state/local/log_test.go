package local

import (
	"context"
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/agentctl/agentctl/state"
	"github.com/agentctl/agentctl/state/statefile"
	"github.com/agentctl/agentctl/state/statetest"
)

// pricing is the run of sampleState.
const pricing = `run.review["pricing"]`

// setTurns changes the turns of s's run and appends the change.
func setTurns(t *testing.T, d *Dir, s *state.State, turns int) {
	t.Helper()
	s.Runs[pricing].Turns = turns
	if err := d.Append(context.Background(), s, state.RunRef(pricing)); err != nil {
		t.Fatal(err)
	}
}

// reread opens the same state directory afresh, as another command
// would, and reads the state.
func reread(t *testing.T, d *Dir) *state.State {
	t.Helper()
	d2, err := OpenDir(d.Path(), WithStateFile(d.StateFile()))
	if err != nil {
		t.Fatal(err)
	}
	s, err := d2.Read(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestAppendRecordsChangesWithoutRewritingTheStateFile(t *testing.T) {
	d := openTestDir(t)
	s := statetest.Sample()
	if err := d.Write(context.Background(), s); err != nil {
		t.Fatal(err)
	}
	before, err := os.ReadFile(d.StateFile())
	if err != nil {
		t.Fatal(err)
	}
	// A run changes, a sandbox goes, a run is added, the outputs change.
	s.Runs[pricing].Status = state.RunRunning
	s.Runs[pricing].Output = json.RawMessage("{ \"verdict\" :\n \"maybe\" }")
	if err := d.Append(context.Background(), s, state.RunRef(pricing)); err != nil {
		t.Fatal(err)
	}
	delete(s.Sandboxes, "sandbox.dev")
	s.Runs["run.new"] = &state.Run{Address: "run.new", Agent: "agent.x", Status: state.RunPending}
	s.Outputs = map[string]*state.Output{"n": {Value: json.RawMessage(`1`)}}
	if err := d.Append(context.Background(), s, state.SandboxRef("sandbox.dev"), state.RunRef("run.new"), state.OutputsRef()); err != nil {
		t.Fatal(err)
	}
	s.Memories = map[string]*state.Memory{"m@s": {Capability: "m", Sandbox: "s", Calls: 2}}
	s.Chats = map[string]*state.Chat{"chat.a": {Address: "chat.a", Agent: "agent.x", Status: state.ChatIdle}}
	if err := d.Append(context.Background(), s, state.MemoryRef("m@s"), state.ChatRef("chat.a")); err != nil {
		t.Fatal(err)
	}
	if s.Serial != 4 {
		t.Fatalf("serial %d after a write and three appends, want 4", s.Serial)
	}
	after, err := os.ReadFile(d.StateFile())
	if err != nil {
		t.Fatal(err)
	}
	if string(before) != string(after) {
		t.Fatal("an append rewrote the state file")
	}
	got := reread(t, d)
	if diff := cmp.Diff(s, got); diff != "" {
		t.Fatalf("state read back differs (-appended +read):\n%s", diff)
	}
	if string(got.Runs[pricing].Output) != `{"verdict":"maybe"}` {
		t.Fatalf("output not compacted: %s", got.Runs[pricing].Output)
	}
}

func TestWriteCompactsTheLog(t *testing.T) {
	d := openTestDir(t)
	s := statetest.Sample()
	if err := d.Write(context.Background(), s); err != nil {
		t.Fatal(err)
	}
	setTurns(t, d, s, 9)
	if _, err := os.Stat(d.LogFile()); err != nil {
		t.Fatalf("no log after an append: %v", err)
	}
	if err := d.Write(context.Background(), s); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(d.LogFile()); !os.IsNotExist(err) {
		t.Fatalf("the log outlived the compaction: %v", err)
	}
	if got := reread(t, d); got.Serial != 3 || got.Runs[pricing].Turns != 9 {
		t.Fatalf("after compaction: serial %d turns %d", got.Serial, got.Runs[pricing].Turns)
	}
	// Appending goes on in a new log.
	setTurns(t, d, s, 10)
	if got := reread(t, d); got.Serial != 4 || got.Runs[pricing].Turns != 10 {
		t.Fatalf("after a new append: serial %d turns %d", got.Serial, got.Runs[pricing].Turns)
	}
}

func TestUnlockCompactsTheLog(t *testing.T) {
	d := openTestDir(t)
	l, err := d.Lock(context.Background(), state.LockInfo{Operation: "test"}, 0)
	if err != nil {
		t.Fatal(err)
	}
	s := statetest.Sample()
	if err := d.Write(context.Background(), s); err != nil {
		t.Fatal(err)
	}
	setTurns(t, d, s, 5)
	if err := l.Unlock(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(d.LogFile()); !os.IsNotExist(err) {
		t.Fatalf("the log outlived the lock: %v", err)
	}
	data, err := os.ReadFile(d.StateFile())
	if err != nil {
		t.Fatal(err)
	}
	whole, err := statefile.DecodeStateVersion(d.StateFile(), data)
	if err != nil {
		t.Fatal(err)
	}
	if whole.Serial != 3 || whole.Runs[pricing].Turns != 5 {
		t.Fatalf("the state file after unlock: serial %d turns %d; want the appended change at serial 3", whole.Serial, whole.Runs[pricing].Turns)
	}
}

// A crash can leave a torn last record (ignored), or the log of a
// compaction whose state file was renamed into place but the log not yet
// removed (its records are skipped).
func TestReadAfterCrash(t *testing.T) {
	d := openTestDir(t)
	s := statetest.Sample()
	if err := d.Write(context.Background(), s); err != nil {
		t.Fatal(err)
	}
	setTurns(t, d, s, 5)
	f, err := os.OpenFile(d.LogFile(), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString(`0badc0de {"serial":3,"lineage":"` + s.Lineage + `","chan`); err != nil {
		t.Fatal(err)
	}
	f.Close()
	if got := reread(t, d); got.Serial != 2 || got.Runs[pricing].Turns != 5 {
		t.Fatalf("with a torn tail: serial %d turns %d", got.Serial, got.Runs[pricing].Turns)
	}
	// The next append truncates the torn tail and continues.
	d2, _ := OpenDir(d.Path())
	s2 := reread(t, d)
	setTurns(t, d2, s2, 6)
	if got := reread(t, d); got.Serial != 3 || got.Runs[pricing].Turns != 6 {
		t.Fatalf("after appending past a torn tail: serial %d turns %d", got.Serial, got.Runs[pricing].Turns)
	}
	// The state file compacted, the log left behind: nothing applies twice.
	logData, err := os.ReadFile(d.LogFile())
	if err != nil {
		t.Fatal(err)
	}
	if err := d2.Write(context.Background(), s2); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(d.LogFile(), logData, 0o600); err != nil {
		t.Fatal(err)
	}
	if got := reread(t, d); got.Serial != 4 || got.Runs[pricing].Turns != 6 {
		t.Fatalf("with a stale log: serial %d turns %d", got.Serial, got.Runs[pricing].Turns)
	}
}

// A log that does not continue the state file (the file restored from
// its backup, or from another state) is refused, saying what to do.
func TestReadLogOfAnotherStateFile(t *testing.T) {
	d := openTestDir(t)
	s := statetest.Sample()
	if err := d.Write(context.Background(), s); err != nil {
		t.Fatal(err)
	}
	if err := d.Write(context.Background(), s); err != nil {
		t.Fatal(err)
	}
	setTurns(t, d, s, 5)
	backup, err := os.ReadFile(d.BackupFile())
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(d.StateFile(), backup, 0o600); err != nil {
		t.Fatal(err)
	}
	d2, _ := OpenDir(d.Path())
	_, err = d2.Read(context.Background())
	if err == nil || !strings.Contains(err.Error(), "does not continue the state file: the state file has serial 1, the log's next record serial 3") ||
		!strings.Contains(err.Error(), "remove the log") {
		t.Fatalf("reading a log that skips serial 2: %v", err)
	}

	other := statetest.Sample()
	other.Serial = 1
	data, err := statefile.EncodeStateVersion(other, "") // serial 2
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(d.StateFile(), data, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err = d2.Read(context.Background()); err == nil || !strings.Contains(err.Error(), "belongs to the state of lineage "+s.Lineage) {
		t.Fatalf("reading the log of another lineage: %v", err)
	}

	if err := os.Remove(d.StateFile()); err != nil {
		t.Fatal(err)
	}
	if _, err = d2.Read(context.Background()); err == nil || !strings.Contains(err.Error(), "the state file "+d.StateFile()+" is missing but its log") {
		t.Fatalf("reading a log without its state file: %v", err)
	}
}

// AGENTCTL_STATE_VERIFY=1 catches a change the caller did not name.
func TestVerifyCatchesAnUnnamedChange(t *testing.T) {
	t.Setenv("AGENTCTL_STATE_VERIFY", "1")
	d := openTestDir(t)
	s := statetest.Sample()
	if err := d.Write(context.Background(), s); err != nil {
		t.Fatal(err)
	}
	s.Runs[pricing].Turns = 5
	s.Sandboxes["sandbox.dev"].Status = state.SandboxStopped
	err := d.Append(context.Background(), s, state.RunRef(pricing))
	if err == nil || !strings.Contains(err.Error(), "changed but not recorded") || !strings.Contains(err.Error(), "sandbox sandbox.dev") {
		t.Fatalf("an unnamed change: %v", err)
	}
	if err := d.Append(context.Background(), s, state.SandboxRef("sandbox.dev")); err != nil {
		t.Fatalf("once named: %v", err)
	}
}
