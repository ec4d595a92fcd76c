// Package config loads an agentctl configuration: it parses the *.hcl
// files of a directory (or one file), evaluates variables, locals and
// functions, decodes every block into typed values (Config) and validates
// them, reporting each problem as an hcl.Diagnostic at its source range.
//
// One file per block type holds its decoding: provider blocks
// (providers.go), manifests (manifests.go), sandboxes (sandbox.go),
// capabilities (capability.go), agents (agent.go), runs (run.go) and
// outputs (output.go); variables and locals are in variables.go, for_each
// in foreach.go, and the evaluation helpers in eval.go.
//
// Provider types are not known here: the caller's Options.Registry
// (providers/builtin.Registry() for the shipped types) lists them, and
// each type decodes its provider block and its sandboxes' own arguments
// into typed settings. The loader hands the type a body whose
// expressions it has already evaluated (boundBody), so variables,
// locals, each and functions work in them, sensitive values are refused
// or recorded for scrubbing, and diagnostics keep their ranges.
//
// Values known only during apply (run outputs, sandbox URLs) are
// evaluated late, by EvalRunInput and EvalOutputs.
package config
