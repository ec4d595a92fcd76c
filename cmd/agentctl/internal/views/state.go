package views

import (
	"fmt"

	"github.com/agentctl/agentctl/cmd/agentctl/internal/arguments"
)

// StateList shows agentctl state list.
type StateList interface {
	// List shows the addresses in the state.
	List(addrs []string) error
}

// NewStateList returns the state list view of viewType.
func NewStateList(viewType arguments.ViewType, view *View) StateList {
	if viewType == arguments.ViewJSON {
		return stateListJSON{view}
	}
	return stateListHuman{view}
}

type stateListHuman struct{ *View }

func (v stateListHuman) List(addrs []string) error {
	for _, a := range addrs {
		fmt.Fprintln(v.Stdout, a)
	}
	return nil
}

type stateListJSON struct{ *View }

func (v stateListJSON) List(addrs []string) error { return writeJSON(v.Stdout, addrs) }

// StateShow shows one object of the state, as the JSON it is stored as.
type StateShow struct{ *View }

// NewStateShow returns the state show view.
func NewStateShow(view *View) *StateShow { return &StateShow{view} }

// Object prints a sandbox or run record.
func (v *StateShow) Object(obj any) error { return writeJSON(v.Stdout, obj) }

// StateRm shows agentctl state rm.
type StateRm struct{ *View }

// NewStateRm returns the state rm view.
func NewStateRm(view *View) *StateRm { return &StateRm{view} }

// Removed reports how many objects were forgotten.
func (v *StateRm) Removed(n int) {
	fmt.Fprintf(v.Stdout, "Removed %d object(s) from the state.\n", n)
}

// ForceUnlock shows agentctl force-unlock.
type ForceUnlock struct{ *View }

// NewForceUnlock returns the force-unlock view.
func NewForceUnlock(view *View) *ForceUnlock { return &ForceUnlock{view} }

// Unlocked reports that the lock was removed.
func (v *ForceUnlock) Unlocked() {
	fmt.Fprintln(v.Stdout, "agentctl state has been successfully unlocked!")
}

// NotLocked reports that there was no lock left to remove: its holder
// exited, and a later command cleared its information.
func (v *ForceUnlock) NotLocked(id string) {
	fmt.Fprintf(v.Stdout, "The state is not locked: lock %s was already released. Nothing to do.\n", id)
}
