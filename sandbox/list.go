package sandbox

import "context"

// Found is a sandbox a provider holds that agentctl created: one carrying
// LabelManaged (a container, a Pod, a remote sandbox) or, for a sandbox
// on this machine, its marker. agentctl query lists them.
type Found struct {
	// ID is the provider's id, as Sandbox.ID and SessionState.ID give it
	// (a directory, a container id, a Pod name, a remote sandbox's id).
	ID string `json:"id"`
	// Name is a name people know it by where the provider has one (a
	// container's name); "" otherwise.
	Name string `json:"name,omitempty"`
	// Lineage and Address are what it was created for (LabelLineage,
	// LabelAddress); "" when it does not say.
	Lineage string `json:"lineage,omitempty"`
	Address string `json:"address,omitempty"`
	// State is the provider's word for its state (running, exited,
	// Pending, ...); "" when the listing does not say.
	State string `json:"state,omitempty"`
}

// Lister is implemented by a Provider that can list the sandboxes it
// holds that agentctl created, of every lineage, and delete one of them:
// agentctl query and its -reap.
type Lister interface {
	// FindManaged lists them. stateDir is Spec.StateDir: where a provider
	// that keeps its sandboxes on this machine keeps them.
	FindManaged(ctx context.Context, stateDir string) ([]Found, error)
	// DeleteFound deletes one that FindManaged listed, with everything it
	// owns; one already gone is not an error. Its error names what it
	// could not delete.
	DeleteFound(ctx context.Context, stateDir string, f Found) error
	// ListsCheaply reports whether FindManaged costs no more than a call
	// on this machine (a directory read, the local Docker Engine): apply
	// lists such providers after it has worked, to warn about orphans,
	// and asks no remote API.
	ListsCheaply() bool
}
