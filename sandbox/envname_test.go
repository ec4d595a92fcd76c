package sandbox

import "testing"

func TestValidEnvName(t *testing.T) {
	for name, want := range map[string]bool{
		"PATH": true, "_x": true, "a1_B2": true,
		"": false, "1A": false, "A-B": false, "A B": false, "A=B": false, "É": false,
	} {
		if got := ValidEnvName(name); got != want {
			t.Errorf("ValidEnvName(%q) = %v, want %v", name, got, want)
		}
	}
}
