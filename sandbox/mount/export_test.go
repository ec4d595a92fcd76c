//go:build linux

package mount

// BenchEnv is the environment that configures def's remote, for the
// benchmark that runs rclone copy on the same remote.
func BenchEnv(def Def) []string { return def.rcloneEnv() }
