package config

// Version is the agentctl language and tool version that
// agentctl { required_version = "..." } is checked against.
const Version = "0.1.0"

const defaultShellTimeout = 120 * 1e9 // 120s, as a time.Duration
