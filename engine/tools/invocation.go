package tools

import "strings"

// Invocation is how a call will run, as an approval policy sees it
// before the call runs (docs/approvals.md, "What a policy sees").
type Invocation struct {
	// Argv is the exact argv the sandbox executes, shell and login flag
	// included (["/bin/sh", "-c", "ls -a"], ["bash", "-lc", "ls"]); nil
	// for a tool that runs no command.
	Argv []string
	// Simple reports an exec_command that runs with /bin/sh -c (no shell
	// of the model's choosing, never a login shell) and whose command is
	// SimpleWords: nothing in it the shell would expand, redirect, chain
	// or substitute.
	Simple bool
	// Words are the command's words when Simple, else nil.
	Words []string
}

// Describer is a tool that can say how a call will run before it runs.
// Describe decodes the arguments as Call does and fails as Call would.
type Describer interface {
	Describe(arguments string) (Invocation, error)
}

// SimpleWords splits cmd into words and reports whether it is a simple
// command: words separated by spaces, each made only of letters, digits
// and _ - . / : , = + @ %, the first (the program) holding no = (which
// the shell would read as a variable assignment). Anything else (quotes,
// $, `, ;, &, |, <, >, (, ), {, }, [, ], *, ?, ~, !, #, \, tabs, newlines,
// non-ASCII) makes it not simple, and the words are nil.
func SimpleWords(cmd string) ([]string, bool) {
	for _, r := range cmd {
		if !simpleRune(r) && r != ' ' {
			return nil, false
		}
	}
	words := strings.Fields(cmd)
	if len(words) == 0 || strings.Contains(words[0], "=") {
		return nil, false
	}
	return words, true
}

func simpleRune(r rune) bool {
	switch {
	case 'a' <= r && r <= 'z', 'A' <= r && r <= 'Z', '0' <= r && r <= '9':
		return true
	}
	return strings.ContainsRune("_-./:,=+@%", r)
}
