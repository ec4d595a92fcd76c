package docker

import (
	"archive/tar"
	"bytes"
	"context"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/agentctl/agentctl/internal/testenv"
	"github.com/agentctl/agentctl/sandbox"
	"github.com/agentctl/agentctl/sandbox/sandboxtest"
)

var testAccounts = sandboxtest.Accounts()

// shadowImage is TestImage with this host's useradd, groupadd and
// usermod (Debian's passwd package) and their libraries: Debian's static
// BusyBox has no adduser or addgroup, and there is no registry to pull an
// image that has account tools from.
const shadowImage = "agentctl-test-shadow:1"

func buildShadowImage(t *testing.T, p *Provider) {
	t.Helper()
	ctx := context.Background()
	if _, err := p.Client().ImageInspect(ctx, shadowImage); err == nil {
		return
	}
	files := map[string]bool{}
	for _, tool := range []string{"useradd", "groupadd", "usermod"} {
		bin, err := exec.LookPath(tool)
		if err != nil {
			testenv.Missing(t, "building an image with account tools needs this host's %s (Debian's passwd package): %v", tool, err)
		}
		files[bin] = true
		out, err := exec.Command("ldd", bin).Output()
		if err != nil {
			testenv.Missing(t, "ldd %s: %v", bin, err)
		}
		for _, f := range strings.Fields(string(out)) {
			if strings.HasPrefix(f, "/") {
				files[f] = true
			}
		}
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	add := func(name string, mode int64, data []byte) {
		if err := tw.WriteHeader(&tar.Header{Name: name, Mode: mode, Size: int64(len(data)), Typeflag: tar.TypeReg}); err != nil {
			t.Fatal(err)
		}
		tw.Write(data)
	}
	df := "FROM " + TestImage + "\n"
	for _, f := range slices.Sorted(maps.Keys(files)) {
		real, err := filepath.EvalSymlinks(f)
		if err != nil {
			t.Fatal(err)
		}
		data, err := os.ReadFile(real)
		if err != nil {
			t.Fatal(err)
		}
		name := "files" + f
		add(name, 0o755, data)
		df += "COPY " + name + " " + f + "\n"
	}
	add("Dockerfile", 0o644, []byte(df))
	tw.Close()
	if err := imageBuild(ctx, p.Client(), shadowImage, &buf); err != nil {
		t.Fatal(err)
	}
}

// The manifest's users are accounts of the container (sandboxtest checks
// their ids, files and refusals): named, and created again without
// error, as a second sandbox of the same image does.
func TestManifestUsers(t *testing.T) {
	buildShadowImage(t, testProvider(t))
	spec := testSpec(t)
	spec.Image = shadowImage
	spec.Accounts = testAccounts
	sb := newSandbox(t, spec)
	sandboxtest.CheckNamed(t, sb, "/workspace")
	if err := sb.createAccounts(context.Background()); err != nil {
		t.Errorf("creating the accounts again: %v", err)
	}
}

// An image without account tools (the test image: Debian's static
// BusyBox has no adduser) is refused with its name and the missing tool,
// and no container is left behind.
func TestManifestUsersWithoutTools(t *testing.T) {
	p := testProvider(t)
	ctx := context.Background()
	tag := TestImage
	spec := testSpec(t)
	spec.Accounts = testAccounts
	sb, err := p.Create(ctx, spec)
	if err == nil {
		sb.Delete(ctx)
		t.Fatal("Create succeeded in an image without adduser or useradd")
	}
	for _, want := range []string{tag, "useradd or adduser", "no tools to create them"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
	left, lerr := p.ListManaged(ctx, spec.Lineage)
	if lerr != nil {
		t.Fatal(lerr)
	}
	if len(left) != 0 {
		t.Errorf("containers left behind: %+v", left)
	}

	// A name the image already uses with another id is a conflict.
	buildShadowImage(t, p)
	spec = testSpec(t)
	spec.Image = shadowImage
	spec.Accounts = sandbox.Accounts{Users: []sandbox.User{{Name: "user", UID: 2005}}}
	if sb, err := p.Create(ctx, spec); err == nil {
		sb.Delete(ctx)
		t.Fatal("Create succeeded with a user the image has with another uid")
	} else if !strings.Contains(err.Error(), "user user already exists in the image with uid 1000, not 2005") {
		t.Errorf("conflict error: %v", err)
	}
}
