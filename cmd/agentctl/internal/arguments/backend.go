package arguments

import "flag"

// Backend are the flags of the commands that work on the state of a
// configuration given by -config (show, output, state, force-unlock,
// exec, tool call) rather than by a PATH argument.
type Backend struct {
	// Config is the configuration file or directory whose state to use.
	Config string
	Vars   Vars
	State  State
}

// register adds the flags; -lock and -lock-timeout only for the commands
// that take the state lock (locking), so that no command accepts a flag
// it would ignore.
func (b *Backend) register(fs *flag.FlagSet, locking bool) {
	b.Vars.register(fs)
	if locking {
		b.State.register(fs)
	} else {
		b.State.registerPath(fs)
	}
	fs.StringVar(&b.Config, "config", ".", "The configuration file or directory whose state to use.")
}

// registerNoColor adds -no-color, which every command accepts.
func registerNoColor(fs *flag.FlagSet, noColor *bool) {
	fs.BoolVar(noColor, "no-color", false, "Disable color in the output.")
}
