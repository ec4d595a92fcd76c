package registry

import "strings"

// LookupEnv returns the value of the variable key in environ, a list of
// KEY=VALUE entries as os.Environ gives them (Env.Environ), and whether
// it is set. When key is set more than once the last entry wins, as it
// does for a command's environment (os/exec), so a caller can override a
// variable by appending to os.Environ(). Every provider reads its
// settings' fallbacks and credentials through it.
func LookupEnv(environ []string, key string) (string, bool) {
	for i := len(environ) - 1; i >= 0; i-- {
		if k, v, ok := strings.Cut(environ[i], "="); ok && k == key {
			return v, true
		}
	}
	return "", false
}

// Getenv is LookupEnv's value: "" when key is not set.
func Getenv(environ []string, key string) string {
	v, _ := LookupEnv(environ, key)
	return v
}
