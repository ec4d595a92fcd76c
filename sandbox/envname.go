package sandbox

// ValidEnvName reports whether k can name an environment variable a
// shell exports: a letter or underscore, then letters, digits and
// underscores.
func ValidEnvName(k string) bool {
	if k == "" {
		return false
	}
	for i, r := range k {
		switch {
		case r == '_', r >= 'A' && r <= 'Z', r >= 'a' && r <= 'z':
		case r >= '0' && r <= '9' && i > 0:
		default:
			return false
		}
	}
	return true
}
