package docker

import (
	"archive/tar"
	"bytes"
	"context"
	"debug/elf"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sync"
	"testing"
	"time"

	"github.com/moby/moby/client"

	"github.com/agentctl/agentctl/internal/testenv"
	"github.com/agentctl/agentctl/sandbox"
)

// TestImage is the tag of the tiny test image the tests build themselves.
const TestImage = "agentctl-test-busybox:1"

// testDockerfile installs busybox's applets as symlinks and adds the
// little a shell environment expects.
const testDockerfile = `FROM scratch
COPY busybox /bin/busybox
RUN ["/bin/busybox", "--install", "-s", "/bin"]
RUN mkdir -p /tmp /root /home/user /etc /var/www && chmod 1777 /tmp && \
    echo 'root:x:0:0:root:/root:/bin/sh' > /etc/passwd && \
    echo 'user:x:1000:1000:user:/home/user:/bin/sh' >> /etc/passwd && \
    printf 'root:x:0:\nuser:x:1000:\n' > /etc/group && \
    chown 1000:1000 /home/user
ENV PATH=/bin
`

func mustDocker() bool { return os.Getenv("AGENTCTL_TEST_DOCKER") == "1" }

var (
	provOnce sync.Once
	provVal  *Provider
	provErr  error
)

// testProvider returns a provider with the test image built, or skips (or
// fails under AGENTCTL_TEST_DOCKER=1) when no engine is reachable.
func testProvider(tb testing.TB) *Provider {
	tb.Helper()
	provOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		provVal, provErr = New(ctx, Options{})
		if provErr != nil {
			return
		}
		provErr = buildTestImage(ctx, provVal.Client())
	})
	if provErr != nil {
		if mustDocker() {
			tb.Fatalf("AGENTCTL_TEST_DOCKER=1 but: %v", provErr)
		}
		tb.Skipf("skipping: Docker not usable (%v); set AGENTCTL_TEST_DOCKER=1 to make this a failure", provErr)
	}
	return provVal
}

// staticBusybox finds a statically linked busybox binary.
func staticBusybox() (string, error) {
	for _, p := range []string{os.Getenv("AGENTCTL_TEST_BUSYBOX"), "/bin/busybox", "/usr/bin/busybox"} {
		if p == "" {
			continue
		}
		f, err := elf.Open(p)
		if err != nil {
			continue
		}
		static := true
		for _, prog := range f.Progs {
			if prog.Type == elf.PT_INTERP {
				static = false
			}
		}
		f.Close()
		if static {
			return p, nil
		}
	}
	return "", errors.New("no statically linked busybox found (install Debian's busybox-static: apt-get install busybox-static)")
}

// buildTestImage builds TestImage from a static busybox unless present.
func buildTestImage(ctx context.Context, cli *client.Client) error {
	if _, err := cli.ImageInspect(ctx, TestImage); err == nil {
		return nil
	}
	bb, err := staticBusybox()
	if err != nil {
		return err
	}
	bin, err := os.ReadFile(bb)
	if err != nil {
		return err
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, f := range []struct {
		name string
		mode int64
		data []byte
	}{{"Dockerfile", 0o644, []byte(testDockerfile)}, {"busybox", 0o755, bin}} {
		if err := tw.WriteHeader(&tar.Header{Name: f.name, Mode: f.mode, Size: int64(len(f.data)), Typeflag: tar.TypeReg}); err != nil {
			return err
		}
		if _, err := tw.Write(f.data); err != nil {
			return err
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	return imageBuild(ctx, cli, TestImage, &buf)
}

// imageBuild builds the tar build context into the image tag.
func imageBuild(ctx context.Context, cli *client.Client, tag string, buildContext io.Reader) error {
	res, err := cli.ImageBuild(ctx, buildContext, client.ImageBuildOptions{Tags: []string{tag}, Remove: true, ForceRemove: true})
	if err != nil {
		return fmt.Errorf("build %s: %w", tag, err)
	}
	defer res.Body.Close()
	dec := json.NewDecoder(res.Body)
	var log bytes.Buffer
	for {
		var m struct {
			Stream      string `json:"stream"`
			Error       string `json:"error"`
			ErrorDetail *struct {
				Message string `json:"message"`
			} `json:"errorDetail"`
		}
		if err := dec.Decode(&m); err != nil {
			if errors.Is(err, io.EOF) {
				break
			}
			return fmt.Errorf("build %s: %w", tag, err)
		}
		log.WriteString(m.Stream)
		if m.Error != "" {
			return fmt.Errorf("build %s: %s\n%s", tag, m.Error, log.String())
		}
	}
	if _, err := cli.ImageInspect(ctx, tag); err != nil {
		return fmt.Errorf("build %s: image missing after build:\n%s", tag, log.String())
	}
	return nil
}

// testLineagePrefix starts the lineage of every container this test
// process creates for itself; TestMain removes those left behind, and only
// those, so test binaries running at the same time (go test ./... runs
// packages in parallel) never remove each other's containers.
var testLineagePrefix = fmt.Sprintf("test-lineage-%d-", os.Getpid())

func testSpec(t testing.TB) sandbox.Spec {
	return sandbox.Spec{
		Address: "sandbox.test[\"" + t.Name() + "\"]",
		Lineage: testLineagePrefix + randHex(4),
		Root:    "/workspace",
		Image:   TestImage,
	}
}

// newSandbox creates a sandbox deleted at the end of the test.
func newSandbox(t testing.TB, spec sandbox.Spec) *Sandbox {
	t.Helper()
	p := testProvider(t)
	ctx := context.Background()
	sb, err := p.Create(ctx, spec)
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	t.Cleanup(func() { _ = sb.Delete(context.Background()) })
	return sb.(*Sandbox)
}

func tarOf(t testing.TB, members ...*tar.Header) *bytes.Buffer {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, h := range members {
		if h.Typeflag == tar.TypeReg && h.Size == 0 && h.Linkname != "" {
			// Linkname doubles as content for regular files in tests.
			data := h.Linkname
			h.Linkname = ""
			h.Size = int64(len(data))
			if err := tw.WriteHeader(h); err != nil {
				t.Fatal(err)
			}
			if _, err := tw.Write([]byte(data)); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return &buf
}

func execOK(t testing.TB, sb *Sandbox, shell string) string {
	t.Helper()
	res, err := sb.Exec(context.Background(), sandbox.ExecRequest{Shell: shell})
	if err != nil {
		t.Fatalf("exec %q: %v", shell, err)
	}
	if res.ExitCode != 0 {
		t.Fatalf("exec %q: exit %d, stderr %q", shell, res.ExitCode, res.Stderr)
	}
	return string(res.Stdout)
}

func dockerCLI(t testing.TB) string {
	p, err := exec.LookPath("docker")
	if err != nil {
		testenv.Missing(t, "docker CLI not installed")
	}
	return p
}
