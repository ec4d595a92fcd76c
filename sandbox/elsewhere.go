package sandbox

// ElsewhereError is returned (wrapped) by Provider.Open for a sandbox
// that belongs to another working directory or host: a local sandbox
// made by the agentctl of another working directory that shares the
// state through a backend. This agentctl cannot reach it, so for it the
// sandbox is not found (ElsewhereError matches ErrNotFound); but it is
// not gone either, so plan leaves it where it is, and only a run that
// needs it here restores it here from its latest snapshot.
type ElsewhereError struct {
	// Where says where the sandbox lives, e.g.
	// "/home/ann/review/.agentctl/sandboxes/box-1234 on host build-1".
	Where string
}

func (e *ElsewhereError) Error() string {
	return "the sandbox lives in " + e.Where + ", which this agentctl cannot reach"
}

// Is makes errors.Is(err, ErrNotFound) true: here, the sandbox is not
// found.
func (e *ElsewhereError) Is(target error) bool { return target == ErrNotFound }
