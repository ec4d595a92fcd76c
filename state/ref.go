package state

// Object kinds of a Ref (Ref.Kind).
const (
	RefSandbox = "sandbox"
	RefRun     = "run"
	RefChat    = "chat"
	RefMemory  = "memory"
	RefOutputs = "outputs"
)

// Ref names one object of the state whose change Append records.
type Ref struct {
	kind, key string
}

// SandboxRef names the sandbox at addr.
func SandboxRef(addr string) Ref { return Ref{RefSandbox, addr} }

// RunRef names the run at addr.
func RunRef(addr string) Ref { return Ref{RefRun, addr} }

// ChatRef names the chat session at addr.
func ChatRef(addr string) Ref { return Ref{RefChat, addr} }

// MemoryRef names the memory record at key (MemoryKey).
func MemoryRef(key string) Ref { return Ref{RefMemory, key} }

// OutputsRef names the outputs, as a whole.
func OutputsRef() Ref { return Ref{kind: RefOutputs} }

func (r Ref) String() string {
	if r.key == "" {
		return r.kind
	}
	return r.kind + " " + r.key
}

// Kind is the kind of object r names: RefSandbox, RefRun, RefChat,
// RefMemory or RefOutputs.
func (r Ref) Kind() string { return r.kind }

// Key is the address or key of the object r names ("" for the outputs).
func (r Ref) Key() string { return r.key }
