package manifest

import "github.com/agentctl/agentctl/internal/digest"

// EntryKind names a manifest entry type of the configuration language.
type EntryKind string

const (
	EntryFile      EntryKind = "file"
	EntryDir       EntryKind = "dir"
	EntryLocalFile EntryKind = "local_file"
	EntryLocalDir  EntryKind = "local_dir"
	EntryGitRepo   EntryKind = "git_repo"
)

// Manifest is the evaluated workspace description the engine hands to the
// sandbox layer; it is built from a config manifest block.
type Manifest struct {
	// Root is the workspace root inside the sandbox, e.g. /workspace.
	Root    string
	Entries []Entry
	// Env is persisted, non-sensitive environment.
	Env map[string]string
	// EphemeralEnv is injected into every exec and never persisted,
	// digested or snapshotted.
	EphemeralEnv map[string]string
	// DigestCache, when set, remembers local_dir digests across commands
	// (EntryDigests, Materialize): an unchanged tree is not read again.
	DigestCache *DigestCache
	// Digests is the algorithm of the content digests of local_dir and
	// local_file entries: the one the state records its digests with
	// (state.State.DigestAlgorithm), so that a state written with
	// SHA-256 plans no change. Empty is digest.BLAKE3.
	Digests digest.Algorithm
}

// Entry is one manifest entry. Path is workspace-relative.
type Entry struct {
	Kind EntryKind
	Path string
	// Content is the file content (EntryFile).
	Content []byte
	// Mode is the file mode for EntryFile (0 = 0644).
	Mode uint32
	// Source is an absolute host path (EntryLocalFile, EntryLocalDir).
	Source string
	// Exclude holds gitignore-like patterns (EntryLocalDir).
	Exclude []string
	// Repo, Ref and Subpath describe a git_repo entry. Repo is "owner/name"
	// (a GitHub repository) or any URL git accepts.
	Repo    string
	Ref     string
	Subpath string
	// Label, when set, names a git_repo in messages instead of
	// "manifest entry git_repo PATH" (a skills capability's source).
	Label string
	// alg is the manifest's Digests, set where entries are digested.
	alg digest.Algorithm
	// byPlan is set by EntryDigests, the plan's: a local_dir digest it
	// finds while the tree's signature holds is kept, once, for the
	// Materialize of the same apply (DigestCache.confirmedDigest).
	byPlan bool
}
