package engine

// Sandbox statuses kept in state beyond the provider's running/stopped.
const (
	statusRunning = "running"
	statusStopped = "stopped"
	// statusDeleted is a sandbox deleted after apply by on_exit =
	// "delete": its snapshot remains and a run that needs it restores it.
	statusDeleted = "deleted"
)

// Run statuses.
const (
	RunPending     = "pending"
	RunRunning     = "running"
	RunInterrupted = "interrupted"
	RunAwaiting    = "awaiting_approval"
	RunCompleted   = "completed"
	RunFailed      = "failed"
	// RunGuardrailTripped is a run a guardrail stopped (state.Run.Guardrail).
	RunGuardrailTripped = "guardrail_tripped"
)
