package sandbox

// StopDiscarder is an optional interface a Sandbox implements when
// stopping it keeps nothing: a Kubernetes Pod without a volume claim is
// deleted with its workspace, where a stopped container or Daytona
// sandbox keeps its files. For such a sandbox on_exit = "stop" first
// makes sure its latest snapshot holds its workspace, then stops it and
// records it as removed: the next run that needs it restores it from the
// snapshot, and a plan with nothing to run leaves it as it is.
type StopDiscarder interface {
	// StopDiscardsWorkspace reports whether Stop loses the workspace.
	StopDiscardsWorkspace() bool
}
