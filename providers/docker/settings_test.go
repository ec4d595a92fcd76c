package docker

import (
	"strings"
	"testing"

	"github.com/agentctl/agentctl/providers/registry"
	"github.com/agentctl/agentctl/providers/registry/registrytest"
)

// decodeSettings decodes src as a sandbox body's arguments with the
// common arguments in args.
func decodeSettings(t *testing.T, src string, args registry.SandboxArgs) (*SandboxSettings, error) {
	return registrytest.Sandbox[*SandboxSettings](t, DecodeSandbox, src, args)
}

func TestDecodeSandbox(t *testing.T) {
	st, err := decodeSettings(t, `
user = "1000:1000"
commit_snapshot = true
cap_add = ["net_raw", "CAP_SYS_PTRACE"]
shm_size = 128`, registry.SandboxArgs{Image: "alpine"})
	if err != nil {
		t.Fatal(err)
	}
	if st.user() != "1000:1000" || !st.CommitSnapshot() || st.shmSizeMB() != 128 ||
		strings.Join(st.capabilities(), ",") != "NET_RAW,SYS_PTRACE" {
		t.Errorf("settings = %+v", st)
	}
	if st, err := decodeSettings(t, ``, registry.SandboxArgs{Image: "alpine"}); err != nil || st.user() != "" || st.CommitSnapshot() || st.shmSizeMB() != DefaultShmSizeMB {
		t.Errorf("defaults: %+v %v", st, err)
	}
	for src, want := range map[string]string{
		`cap_add = ["SYS_EVERYTHING"]`: `"SYS_EVERYTHING" is not a Linux capability`,
		`shm_size = 2000000`:           "at most 1048576",
		`shm_size = -1`:                "0 or more",
		`commit_snapshot = "maybe"`:    "a bool is required",
		`snapshot = "x"`:               `"snapshot" is not expected`,
	} {
		if _, err := decodeSettings(t, src, registry.SandboxArgs{Image: "alpine"}); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: err = %v, want %q", src, err, want)
		}
	}
	if _, err := decodeSettings(t, ``, registry.SandboxArgs{}); err == nil || !strings.Contains(err.Error(), "Missing image") {
		t.Errorf("no image: %v", err)
	}
}
