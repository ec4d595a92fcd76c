// Package layering holds the import rules between agentctl's packages
// (docs/architecture.md) and the test that enforces them.
package layering

// Rule forbids packages matching From to import packages matching To.
// Patterns are module-relative import paths; a trailing "/..." matches
// the package and everything below it.
type Rule struct {
	From, To []string
	Why      string
}

// Rules are the allowed import directions, written as what is forbidden.
// They apply to the code that ships (non-test files); tests may reach
// upward to drive a real peer end to end.
var Rules = []Rule{
	{
		From: []string{"addrs", "model", "graph", "internal/..."},
		To:   []string{"config/...", "state/...", "engine/...", "providers/...", "sandbox/...", "cmd/..."},
		Why:  "leaf packages depend on nothing of the project but each other",
	},
	{
		From: []string{"sandbox/..."},
		To:   []string{"config/...", "state/...", "engine/...", "providers/...", "cmd/..."},
		Why:  "the sandbox contract sits below everything that uses it",
	},
	{
		From: []string{"providers/..."},
		To:   []string{"config/...", "state/...", "engine/...", "cmd/..."},
		Why:  "providers implement the sandbox and model contracts; config and the engine call them, never the reverse",
	},
	{
		From: []string{"providers/registry"},
		To:   []string{"internal/cassette"},
		Why:  "the registry is the provider contract; record and replay reach a provider as an http.RoundTripper (registry.Env.Transport)",
	},
	{
		From: []string{"state/...", "config/..."},
		To:   []string{"engine/...", "cmd/..."},
		Why:  "state and config are the engine's inputs",
	},
	{
		From: []string{"state/..."},
		To:   []string{"config/...", "providers/..."},
		Why:  "the state records results; it does not load configuration or talk to providers",
	},
	{
		From: []string{"state", "state/statefile", "state/local", "engine/..."},
		To:   []string{"state/pgstore"},
		Why:  "the engine and the storage contract know stores only as state.Store; the command line picks the backend",
	},
	{
		From: []string{"state", "state/statefile", "engine/..."},
		To:   []string{"state/local"},
		Why:  "the engine knows stores only as state.Store, and the file formats know no store; the command line opens the local one",
	},
	{
		From: []string{"engine/..."},
		To:   []string{"cmd/..."},
		Why:  "the engine knows nothing of the command line",
	},
}
