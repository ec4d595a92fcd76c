package kubernetes

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"io"
	"io/fs"
	"net/http"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/agentctl/agentctl/internal/k8stest"
	"github.com/agentctl/agentctl/sandbox"
	"github.com/agentctl/agentctl/sandbox/hostfs"
)

func TestCreateLabelsAndHardening(t *testing.T) {
	t.Parallel()
	c := testCluster(t)
	spec := testSpec(t)
	sb := c.newSandbox(t, spec)
	ctx := context.Background()
	pod, err := c.cs.CoreV1().Pods(c.ns).Get(ctx, sb.Pod(), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if pod.Labels[sandbox.LabelManaged] != "true" || pod.Labels[sandbox.LabelLineage] != spec.Lineage ||
		pod.Annotations[AnnotationAddress] != spec.Address || pod.Labels[sandbox.LabelAddress] != labelValue(spec.Address) {
		t.Errorf("labels %v annotations %v", pod.Labels, pod.Annotations)
	}
	if *pod.Spec.AutomountServiceAccountToken || pod.Spec.RestartPolicy != corev1.RestartPolicyNever {
		t.Errorf("pod spec %+v", pod.Spec)
	}
	// What a command in the Pod sees: no service account token, no
	// service links, only the default capabilities, no privilege gain.
	out := execOK(t, sb, `test -e /var/run/secrets/kubernetes.io/serviceaccount/token && echo TOKEN
env | grep -c _SERVICE_HOST || true
grep -E '^(CapEff|NoNewPrivs|Seccomp):' /proc/self/status | tr -s '\t' ' '
pwd`)
	want := "1\nCapEff: 00000000000004fb\nNoNewPrivs: 1\nSeccomp: 2\n/workspace\n"
	if out != want {
		// KUBERNETES_SERVICE_HOST is always set: one match.
		t.Errorf("in the Pod:\n%s\nwant\n%s", out, want)
	}
	st := sb.Session()
	if st.Provider != Kind || !strings.Contains(string(st.Data), `"pod":"`+sb.Pod()+`"`) || strings.Contains(string(st.Data), "token") {
		t.Errorf("session %s %s", st.ID, st.Data)
	}
}

func TestExec(t *testing.T) {
	t.Parallel()
	c := testCluster(t)
	sb := c.newSandbox(t, testSpec(t))
	ctx := context.Background()
	res, err := sb.Exec(ctx, sandbox.ExecRequest{Shell: "echo out; echo err >&2; exit 3"})
	if err != nil {
		t.Fatal(err)
	}
	if res.ExitCode != 3 || string(res.Stdout) != "out\n" || string(res.Stderr) != "err\n" || res.TimedOut || res.Wall <= 0 {
		t.Fatalf("exec result %+v", res)
	}
	res, err = sb.Exec(ctx, sandbox.ExecRequest{Argv: []string{"cat"}, Stdin: strings.NewReader("from stdin")})
	if err != nil || string(res.Stdout) != "from stdin" || res.ExitCode != 0 {
		t.Fatalf("stdin: %+v %v", res, err)
	}
	big := strings.Repeat("0123456789abcdef", 1<<16) // 1 MiB through stdin and back
	res, err = sb.Exec(ctx, sandbox.ExecRequest{Shell: "wc -c", Stdin: strings.NewReader(big)})
	if err != nil || strings.TrimSpace(string(res.Stdout)) != "1048576" {
		t.Fatalf("large stdin: %q %v", res.Stdout, err)
	}
	execOK(t, sb, "mkdir -p sub/dir")
	res, err = sb.Exec(ctx, sandbox.ExecRequest{Argv: []string{"sh", "-c", `pwd; echo "$FOO"; echo "$2"`, "sh", "a b", "it's"}, Workdir: "sub/dir", Env: map[string]string{"FOO": "bar 'baz'"}})
	if err != nil || string(res.Stdout) != "/workspace/sub/dir\nbar 'baz'\nit's\n" {
		t.Fatalf("workdir/env/argv: %q %v", res.Stdout, err)
	}
	if _, err := sb.Exec(ctx, sandbox.ExecRequest{Shell: "true", Workdir: "../etc"}); !errors.Is(err, sandbox.ErrPathEscape) {
		t.Fatalf("workdir .. : %v", err)
	}
	execOK(t, sb, "ln -s /etc etclink")
	if _, err := sb.Exec(ctx, sandbox.ExecRequest{Shell: "true", Workdir: "etclink"}); !errors.Is(err, sandbox.ErrPathEscape) {
		t.Fatalf("workdir through a link out: %v", err)
	}
	res, err = sb.Exec(ctx, sandbox.ExecRequest{Argv: []string{"/no/such/program"}})
	if err != nil || res.ExitCode != 127 {
		t.Fatalf("missing program: %+v %v", res, err)
	}
	if _, err := sb.Exec(ctx, sandbox.ExecRequest{Shell: "id", User: "mallory"}); !errors.As(err, new(*sandbox.UnknownUserError)) {
		t.Fatalf("undeclared user: %v", err)
	}
	// Large output keeps head and tail, per stream.
	res, err = sb.Exec(ctx, sandbox.ExecRequest{Shell: "echo BEGIN; seq 1 200000; echo END; seq 1 100000 >&2", OutputLimit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	if !res.Truncated || res.OriginalStdout < 1_000_000 || !strings.HasPrefix(string(res.Stdout), "BEGIN\n1\n") || !strings.HasSuffix(string(res.Stdout), "200000\nEND\n") || len(res.Stdout) > 1200 ||
		res.OriginalStderr < 500_000 || !strings.HasSuffix(string(res.Stderr), "100000\n") {
		t.Fatalf("truncation: truncated=%v original=%d/%d len=%d", res.Truncated, res.OriginalStdout, res.OriginalStderr, len(res.Stdout))
	}
	// 64 MiB of output: streamed, not held. The container runtime here
	// (containerd's CRI exec) can close a stream early under load; when it
	// does, the loss must be reported, never passed off as the output.
	res, err = sb.Exec(ctx, sandbox.ExecRequest{Shell: "head -c 67108864 /dev/zero"})
	if errors.Is(err, sandbox.ErrOutputLost) && res.OriginalStdout < 64<<20 && res.ExitCode == 0 {
		t.Logf("64 MiB: the runtime cut the stream, reported: %v", err)
	} else if err != nil || res.OriginalStdout != 64<<20 || len(res.Stdout) > sandbox.DefaultOutputLimit+200 {
		t.Fatalf("64 MiB: %d bytes kept of %d, %v", len(res.Stdout), res.OriginalStdout, err)
	}
}

func TestExecTimeoutKillsTree(t *testing.T) {
	t.Parallel()
	c := testCluster(t)
	sb := c.newSandbox(t, testSpec(t))
	ctx := context.Background()
	// A child in its own session and a grandchild in the background: a
	// process-group kill would miss the first.
	start := time.Now()
	res, err := sb.Exec(ctx, sandbox.ExecRequest{
		Shell:   "setsid sh -c 'sleep 1001' & (sleep 1002 &) ; echo started; sleep 1003",
		Timeout: time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	if !res.TimedOut || string(res.Stdout) != "started\n" || res.ExitCode != 137 || time.Since(start) > 10*time.Second {
		t.Fatalf("timeout result %+v after %v", res, time.Since(start))
	}
	if ps := execOK(t, sb, "ps -o pid,args"); strings.Contains(ps, "sleep 100") {
		t.Fatalf("processes left after timeout:\n%s", ps)
	}
	// Cancelling the context kills the command too.
	cctx, cancel := context.WithCancel(ctx)
	go func() { time.Sleep(500 * time.Millisecond); cancel() }()
	if _, err := sb.Exec(cctx, sandbox.ExecRequest{Shell: "sleep 1006"}); !errors.Is(err, context.Canceled) {
		t.Fatalf("Exec with a cancelled context: %v", err)
	}
	if ps := execOK(t, sb, "ps -o args"); strings.Contains(ps, "sleep 1006") {
		t.Fatalf("process left after cancel:\n%s", ps)
	}
}

func TestFilesRoundTrip(t *testing.T) {
	t.Parallel()
	c := testCluster(t)
	sb := c.newSandbox(t, testSpec(t))
	ctx := context.Background()
	if err := sb.WriteFile(ctx, "a/b/c.txt", []byte("hello\n"), 0o640); err != nil {
		t.Fatal(err)
	}
	got, err := sb.ReadFile(ctx, "a/b/c.txt", 0)
	if err != nil || string(got) != "hello\n" {
		t.Fatalf("ReadFile = %q, %v", got, err)
	}
	if _, err := sb.ReadFile(ctx, "a/b/c.txt", 3); err == nil {
		t.Fatal("ReadFile over the limit succeeded")
	}
	fi, err := sb.Stat(ctx, "a/b/c.txt")
	if err != nil || fi.Size != 6 || fi.Mode.Perm() != 0o640 || fi.Path != "a/b/c.txt" || fi.ModTime.IsZero() {
		t.Fatalf("Stat = %+v, %v", fi, err)
	}
	if out := execOK(t, sb, "cat a/b/c.txt"); out != "hello\n" {
		t.Fatalf("cat = %q", out)
	}
	if err := sb.Mkdir(ctx, "x/y/z"); err != nil {
		t.Fatal(err)
	}
	if err := sb.Mkdir(ctx, "x/y/z"); err != nil {
		t.Fatalf("Mkdir of an existing dir: %v", err)
	}
	execOK(t, sb, "ln -s a/b/c.txt link && touch .hidden ./-dash && printf x > 'new\nline'")
	ents, err := sb.ReadDir(ctx, ".")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		names = append(names, e.Path)
	}
	if strings.Join(names, ",") != "-dash,.hidden,a,link,new\nline,x" {
		t.Fatalf("ReadDir = %q", names)
	}
	for _, e := range ents {
		switch e.Path {
		case "link":
			if e.Target != "a/b/c.txt" || e.Mode&fs.ModeSymlink == 0 {
				t.Errorf("link entry %+v", e)
			}
		case "a":
			if !e.Mode.IsDir() {
				t.Errorf("dir entry %+v", e)
			}
		case "new\nline":
			if e.Size != 1 || !e.Mode.IsRegular() {
				t.Errorf("file entry %+v", e)
			}
		}
	}
	if got, err := sb.ReadFile(ctx, "link", 0); err != nil || string(got) != "hello\n" {
		t.Fatalf("ReadFile through an inner link = %q, %v", got, err)
	}
	if err := sb.WriteFile(ctx, "link", []byte("via link"), 0o644); err != nil {
		t.Fatal(err)
	}
	if out := execOK(t, sb, "cat a/b/c.txt"); out != "via link" {
		t.Fatalf("write through inner link: %q", out)
	}
	if err := sb.Remove(ctx, "link"); err != nil {
		t.Fatal(err)
	}
	if _, err := sb.Stat(ctx, "link"); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("Stat after Remove: %v", err)
	}
	if err := sb.Remove(ctx, "x/y"); err == nil {
		t.Fatal("Remove of a non-empty dir succeeded")
	}
	if _, err := sb.ReadFile(ctx, "nope", 0); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("ReadFile missing: %v", err)
	}
	if got, err := sb.ReadFile(ctx, "/workspace/a/b/c.txt", 0); err != nil || string(got) != "via link" {
		t.Fatalf("absolute inside root: %q %v", got, err)
	}
	// Binary content survives both ways.
	bin := make([]byte, 256*1024)
	for i := range bin {
		bin[i] = byte(i * 7)
	}
	if err := sb.WriteFile(ctx, "bin.dat", bin, 0o600); err != nil {
		t.Fatal(err)
	}
	if got, err := sb.ReadFile(ctx, "bin.dat", 0); err != nil || !bytes.Equal(got, bin) {
		t.Fatalf("binary round trip: %d bytes, %v", len(got), err)
	}
	// A FIFO is refused, not opened.
	execOK(t, sb, "mkfifo fifo")
	if fi, err := sb.Stat(ctx, "fifo"); err != nil || fi.Mode.Type() != fs.ModeNamedPipe {
		t.Fatalf("Stat of a FIFO: %v %v, want a named pipe", fi.Mode, err)
	}
	if _, err := sb.ReadFile(ctx, "fifo", 0); !errors.Is(err, sandbox.ErrNotRegular) {
		t.Fatalf("ReadFile of a FIFO: %v", err)
	}
}

func TestCopyInOut(t *testing.T) {
	t.Parallel()
	c := testCluster(t)
	sb := c.newSandbox(t, testSpec(t))
	ctx := context.Background()
	in := tarOf(t,
		&tar.Header{Name: "src/", Typeflag: tar.TypeDir, Mode: 0o755},
		&tar.Header{Name: "src/main.go", Typeflag: tar.TypeReg, Mode: 0o644, Linkname: "package main\n"},
		&tar.Header{Name: "./deep/er/file.txt", Typeflag: tar.TypeReg, Mode: 0o4755, Linkname: "deep"},
		&tar.Header{Name: "src/link", Typeflag: tar.TypeSymlink, Linkname: "main.go"},
		&tar.Header{Name: "src/secret", Typeflag: tar.TypeReg, Mode: 0o600, Linkname: "s"},
	)
	if err := sb.CopyIn(ctx, "proj", in); err != nil {
		t.Fatal(err)
	}
	if got := execOK(t, sb, "cat proj/src/main.go proj/deep/er/file.txt proj/src/link; stat -c %a proj/deep/er/file.txt proj/src/secret"); got != "package main\ndeeppackage main\n755\n600\n" {
		t.Fatalf("after CopyIn: %q", got)
	}
	rc, err := sb.CopyOut(ctx, "proj")
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	tr := tar.NewReader(rc)
	got := map[string]string{}
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(tr)
		got[h.Name] = string(b) + h.Linkname
	}
	want := map[string]string{"src/": "", "src/main.go": "package main\n", "src/link": "main.go", "src/secret": "s",
		"deep/": "", "deep/er/": "", "deep/er/file.txt": "deep"}
	if len(got) != len(want) {
		t.Fatalf("CopyOut members %v", got)
	}
	for k, v := range want {
		if got[k] != v {
			t.Fatalf("CopyOut member %q = %q, want %q (all: %v)", k, got[k], v, got)
		}
	}
	// A large tree round trip into a second sandbox, as a snapshot
	// restore does.
	execOK(t, sb, "mkdir -p many && i=0; while [ $i -lt 500 ]; do echo $i > many/f$i; i=$((i+1)); done; head -c 20000000 /dev/urandom > big.bin; sha256sum big.bin > big.sum")
	rc2, err := sb.CopyOut(ctx, ".")
	if err != nil {
		t.Fatal(err)
	}
	sb2 := c.newSandbox(t, testSpec(t))
	if err := sb2.CopyIn(ctx, ".", rc2); err != nil {
		t.Fatal(err)
	}
	rc2.Close()
	if got := execOK(t, sb2, "cat proj/src/link many/f499; ls many | wc -l; sha256sum -c big.sum"); got != "package main\n499\n500\nbig.bin: OK\n" {
		t.Fatalf("restored: %q", got)
	}
}

func TestEscapes(t *testing.T) {
	t.Parallel()
	c := testCluster(t)
	sb := c.newSandbox(t, testSpec(t))
	ctx := context.Background()
	execOK(t, sb, "ln -s /etc/passwd passwd; ln -s / rootlink; ln -s ../etc up; mkdir -p d; ln -s ../../etc d/up2; ln -s /workspace/d inner")
	for _, p := range []string{"passwd", "rootlink/etc/passwd", "up/passwd", "d/up2/passwd", "inner/up2/passwd", "../etc/passwd", "/etc/passwd", "a/../../etc/passwd"} {
		if _, err := sb.ReadFile(ctx, p, 0); !errors.Is(err, sandbox.ErrPathEscape) {
			t.Errorf("ReadFile(%q) = %v, want ErrPathEscape", p, err)
		}
		if err := sb.WriteFile(ctx, p, []byte("pwned"), 0o644); !errors.Is(err, sandbox.ErrPathEscape) {
			t.Errorf("WriteFile(%q) = %v, want ErrPathEscape", p, err)
		}
	}
	for _, p := range []string{"rootlink/tmp/x", "up/x"} {
		if err := sb.Mkdir(ctx, p); !errors.Is(err, sandbox.ErrPathEscape) {
			t.Errorf("Mkdir(%q) = %v", p, err)
		}
		if err := sb.CopyIn(ctx, p, tarOf(t)); !errors.Is(err, sandbox.ErrPathEscape) {
			t.Errorf("CopyIn(%q) = %v", p, err)
		}
	}
	if _, err := sb.ReadDir(ctx, "rootlink"); !errors.Is(err, sandbox.ErrPathEscape) {
		t.Errorf("ReadDir(rootlink) = %v", err)
	}
	if _, err := sb.CopyOut(ctx, "rootlink"); !errors.Is(err, sandbox.ErrPathEscape) {
		t.Errorf("CopyOut(rootlink) = %v", err)
	}
	if fi, err := sb.Stat(ctx, "passwd"); err != nil || fi.Target != "/etc/passwd" || fi.Mode&fs.ModeSymlink == 0 {
		t.Errorf("Stat(passwd) = %+v, %v", fi, err)
	}
	if err := sb.Remove(ctx, "passwd"); err != nil {
		t.Fatal(err)
	}
	if out := execOK(t, sb, "head -c 5 /etc/passwd"); out != "root:" {
		t.Fatalf("/etc/passwd changed: %q", out)
	}
	hostile := []struct {
		name string
		tar  *bytes.Buffer
		want error
	}{
		{"absolute", tarOf(t, &tar.Header{Name: "/etc/evil", Typeflag: tar.TypeReg, Linkname: "x"}), sandbox.ErrPathEscape},
		{"dotdot", tarOf(t, &tar.Header{Name: "a/../../evil", Typeflag: tar.TypeReg, Linkname: "x"}), sandbox.ErrPathEscape},
		{"write through symlink out", tarOf(t, &tar.Header{Name: "l", Typeflag: tar.TypeSymlink, Linkname: "/etc"}, &tar.Header{Name: "l/evil", Typeflag: tar.TypeReg, Linkname: "x"}), sandbox.ErrPathEscape},
		{"directory over symlink out", tarOf(t, &tar.Header{Name: "l", Typeflag: tar.TypeSymlink, Linkname: "/etc"}, &tar.Header{Name: "l/", Typeflag: tar.TypeDir}, &tar.Header{Name: "l/evil", Typeflag: tar.TypeReg, Linkname: "x"}), sandbox.ErrPathEscape},
		{"hardlink", tarOf(t, &tar.Header{Name: "h", Typeflag: tar.TypeLink, Linkname: "/etc/passwd"}), hostfs.ErrUnsafeArchive},
		{"device", tarOf(t, &tar.Header{Name: "dev", Typeflag: tar.TypeChar, Devmajor: 1, Devminor: 1}), hostfs.ErrUnsafeArchive},
		{"fifo", tarOf(t, &tar.Header{Name: "fifo", Typeflag: tar.TypeFifo}), hostfs.ErrUnsafeArchive},
	}
	for _, h := range hostile {
		if err := sb.CopyIn(ctx, "in", h.tar); !errors.Is(err, h.want) {
			t.Errorf("CopyIn %s: %v, want %v", h.name, err, h.want)
		}
	}
	if out := execOK(t, sb, "ls /etc"); strings.Contains(out, "evil") {
		t.Fatal("/etc/evil was written")
	}
	// Links whose target leaves the workspace are kept as links.
	kept := tarOf(t, &tar.Header{Name: "venv/bin/python", Typeflag: tar.TypeSymlink, Linkname: "/usr/bin/python3"},
		&tar.Header{Name: "venv/up", Typeflag: tar.TypeSymlink, Linkname: "../../../etc"})
	if err := sb.CopyIn(ctx, "kept", kept); err != nil {
		t.Fatalf("CopyIn of links leaving the workspace: %v", err)
	}
	for p, want := range map[string]string{"kept/venv/bin/python": "/usr/bin/python3", "kept/venv/up": "../../../etc"} {
		if fi, err := sb.Stat(ctx, p); err != nil || fi.Mode&fs.ModeSymlink == 0 || fi.Target != want {
			t.Errorf("%s: %+v, %v; want a link to %s", p, fi, err, want)
		}
	}
	// A symlink already in the workspace where the archive has a
	// directory is replaced by a directory: nothing reaches /etc.
	execOK(t, sb, "mkdir -p in2 && ln -s /etc in2/etc && ln -s /etc 'in2/odd\nname'")
	err := sb.CopyIn(ctx, "in2", tarOf(t, &tar.Header{Name: "etc/evil", Typeflag: tar.TypeReg, Mode: 0o644, Linkname: "pwned"},
		&tar.Header{Name: "odd\nname/evil2", Typeflag: tar.TypeReg, Mode: 0o644, Linkname: "pwned2"}))
	if err != nil {
		t.Fatal(err)
	}
	if out := execOK(t, sb, "ls /etc/evil /etc/evil2 2>/dev/null; cat in2/etc/evil in2/odd*/evil2"); out != "pwnedpwned2" {
		t.Fatalf("write through existing link: %q", out)
	}
	// A file member replaces an existing link itself, not its target.
	execOK(t, sb, "ln -s /etc/hostname in2/host")
	if err := sb.CopyIn(ctx, "in2", tarOf(t, &tar.Header{Name: "host", Typeflag: tar.TypeReg, Mode: 0o644, Linkname: "mine"})); err != nil {
		t.Fatal(err)
	}
	if out := execOK(t, sb, "test -L in2/host || cat in2/host; grep -c mine /etc/hostname || true"); out != "mine0\n" {
		t.Fatalf("file over link: %q", out)
	}
}

func TestLifecycle(t *testing.T) {
	t.Parallel()
	c := testCluster(t)
	spec := testSpec(t)
	sb := c.newSandbox(t, spec)
	ctx := context.Background()
	// Reconnect from session state, as the next apply does.
	sb2, err := c.p.Open(ctx, spec, sb.Session())
	if err != nil {
		t.Fatal(err)
	}
	if st, err := sb2.Refresh(ctx); err != nil || st != sandbox.StatusRunning {
		t.Fatalf("Refresh = %v, %v", st, err)
	}
	// Stop deletes the Pod: without a volume the sandbox is gone (the
	// engine restores its snapshot into a new one).
	if err := sb.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if st, err := sb2.Refresh(ctx); err != nil || st != sandbox.StatusMissing {
		t.Fatalf("Refresh after Stop = %v, %v", st, err)
	}
	if _, err := c.p.Open(ctx, spec, sb.Session()); !errors.Is(err, sandbox.ErrNotFound) {
		t.Fatalf("Open after Stop: %v", err)
	}
	if _, err := sb2.Exec(ctx, sandbox.ExecRequest{Shell: "true"}); !errors.Is(err, sandbox.ErrNotFound) {
		t.Fatalf("Exec after Stop: %v", err)
	}
	if err := sb2.Start(ctx); !errors.Is(err, sandbox.ErrNotFound) {
		t.Fatalf("Start without a volume after Stop: %v", err)
	}
	if err := sb2.Delete(ctx); err != nil {
		t.Fatalf("Delete of a missing sandbox: %v", err)
	}
	// A Pod deleted behind agentctl's back is missing too; an evicted
	// (failed) one likewise.
	sb3 := c.newSandbox(t, testSpec(t))
	// The container's command ends (the exec ends with it).
	_, _ = sb3.Exec(ctx, sandbox.ExecRequest{Shell: "kill -TERM 1"})
	deadline := time.Now().Add(30 * time.Second)
	for {
		st, err := sb3.Refresh(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if st == sandbox.StatusMissing {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("a Pod whose container ended is %s", st)
		}
		time.Sleep(200 * time.Millisecond)
	}
	if err := sb3.Delete(ctx); err != nil {
		t.Fatal(err)
	}
	if left := c.labelled(t, spec.Lineage); len(left) != 0 {
		t.Fatalf("left after Delete: %v", left)
	}
	// A stopped sandbox with a Service: the sandbox is missing (plan
	// says restore), yet Open finds it so that destroy removes the
	// Service.
	svcSpec := testSpec(t)
	svcSpec.Ports = []int{8080}
	svcSpec.Settings = &SandboxSettings{Service: true}
	sb4 := c.newSandbox(t, svcSpec)
	if err := sb4.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	sb5, err := c.p.Open(ctx, svcSpec, sb4.Session())
	if err != nil {
		t.Fatalf("Open of a stopped sandbox with a Service: %v", err)
	}
	if st, err := sb5.Refresh(ctx); err != nil || st != sandbox.StatusMissing {
		t.Fatalf("Refresh of a stopped sandbox with a Service = %v, %v", st, err)
	}
	if err := sb5.Delete(ctx); err != nil {
		t.Fatal(err)
	}
	if left := c.labelled(t, svcSpec.Lineage); len(left) != 0 {
		t.Fatalf("left after Delete: %v", left)
	}
}

// With a volume block, Stop deletes only the Pod: Start mounts the claim
// in a new Pod, the workspace intact; Delete removes the claim too.
func TestVolumeStopStart(t *testing.T) {
	t.Parallel()
	c := testCluster(t)
	spec := testSpec(t)
	spec.Settings = &SandboxSettings{Volume: &Volume{StorageClass: k8stest.StorageClass, Size: "100Mi"}}
	spec.Accounts = sandbox.Accounts{Users: []sandbox.User{{Name: "alice", UID: 2001}}}
	spec.Image = k8stest.UsersImage
	sb := c.newSandbox(t, spec)
	ctx := context.Background()
	execOK(t, sb, "echo kept > keep.txt")
	pvc, err := c.cs.CoreV1().PersistentVolumeClaims(c.ns).Get(ctx, sb.Claim(), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if q := pvc.Spec.Resources.Requests.Storage(); q.String() != "100Mi" || pvc.Spec.StorageClassName == nil || *pvc.Spec.StorageClassName != k8stest.StorageClass || pvc.Labels[sandbox.LabelLineage] != spec.Lineage {
		t.Errorf("claim: %v %v %v", q, pvc.Spec.StorageClassName, pvc.Labels)
	}
	pod1 := sb.Pod()
	if err := sb.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := c.cs.CoreV1().Pods(c.ns).Get(ctx, pod1, metav1.GetOptions{}); err == nil {
		t.Fatal("Stop left the Pod")
	}
	sb2, err := c.p.Open(ctx, spec, sb.Session())
	if err != nil {
		t.Fatal(err)
	}
	if st, err := sb2.Refresh(ctx); err != nil || st != sandbox.StatusStopped {
		t.Fatalf("Refresh after Stop = %v, %v", st, err)
	}
	if err := sb2.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if sb2.(*Sandbox).Pod() == pod1 {
		t.Fatal("Start reused the deleted Pod's name")
	}
	if out := execOK(t, sb2, "cat keep.txt"); out != "kept\n" {
		t.Fatalf("after Start: %q", out)
	}
	// The accounts live in the container: the new Pod has them again.
	if res := sandboxExecAs(t, sb2, "alice", "id -u"); strings.TrimSpace(string(res.Stdout)) != "2001" {
		t.Fatalf("alice after Start: %+v", res)
	}
	// Deleted behind agentctl's back: Start makes a new Pod on the claim.
	if err := c.cs.CoreV1().Pods(c.ns).Delete(ctx, sb2.(*Sandbox).Pod(), metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := sb2.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if out := execOK(t, sb2, "cat keep.txt"); out != "kept\n" {
		t.Fatalf("after a deletion behind agentctl's back: %q", out)
	}
	if err := sb2.Delete(ctx); err != nil {
		t.Fatal(err)
	}
	if left := c.labelled(t, spec.Lineage); len(left) != 0 {
		t.Fatalf("left after Delete: %v", left)
	}
}

func sandboxExecAs(t *testing.T, sb sandbox.Sandbox, user, script string) sandbox.ExecResult {
	t.Helper()
	res, err := sb.Exec(context.Background(), sandbox.ExecRequest{Shell: script, User: user})
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// A Pod that cannot be scheduled, or whose image is missing, fails the
// create at once with its events, and leaves nothing behind.
func TestCreateFailsFastWithEvents(t *testing.T) {
	t.Parallel()
	c := testCluster(t)
	ctx := context.Background()
	spec := testSpec(t)
	spec.Settings = &SandboxSettings{NodeSelector: map[string]string{"agentctl.test/no-such-node": "x"}}
	start := time.Now()
	_, err := c.p.Create(ctx, spec)
	if err == nil {
		t.Fatal("a Pod that no node can take was created")
	}
	mustContain(t, "unschedulable", err.Error(), "cannot be scheduled", "didn't match Pod's node affinity/selector", "events:", "FailedScheduling")
	if time.Since(start) > 30*time.Second {
		t.Errorf("an unschedulable Pod took %v to be reported", time.Since(start))
	}
	spec = testSpec(t)
	spec.Image = "agentctl.test/no-such-image:1"
	_, err = c.p.Create(ctx, spec)
	if err == nil {
		t.Fatal("a Pod with a missing image was created")
	}
	mustContain(t, "missing image", err.Error(), "agentctl.test/no-such-image:1", "ErrImagePull", "events:")
	if left := c.labelled(t, spec.Lineage); len(left) != 0 {
		t.Fatalf("left after failed creates: %v", left)
	}
	pods, _ := c.cs.CoreV1().Pods(c.ns).List(ctx, metav1.ListOptions{})
	if len(pods.Items) != 0 {
		t.Fatalf("Pods left: %d", len(pods.Items))
	}
	t.Logf("missing image: %v", err)
}

// What an interrupted create left (a Pod with the same lineage and
// address the state never recorded) is removed by the next create.
func TestCreateRemovesLeftovers(t *testing.T) {
	t.Parallel()
	c := testCluster(t)
	spec := testSpec(t)
	spec.Ports = []int{8080}
	spec.Settings = &SandboxSettings{Service: true}
	ctx := context.Background()
	first, err := c.p.Create(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	other := testSpec(t)
	other.Lineage = spec.Lineage
	other.Address = "sandbox.other"
	keep := c.newSandbox(t, other)
	sb := c.newSandbox(t, spec)
	if _, err := c.cs.CoreV1().Pods(c.ns).Get(ctx, first.(*Sandbox).Pod(), metav1.GetOptions{}); err == nil {
		t.Fatal("the leftover Pod is still there")
	}
	if _, err := c.cs.CoreV1().Services(c.ns).Get(ctx, first.(*Sandbox).Service(), metav1.GetOptions{}); err == nil {
		t.Fatal("the leftover Service is still there")
	}
	execOK(t, keep, "true")
	execOK(t, sb, "true")
}

func TestPortsAndService(t *testing.T) {
	t.Parallel()
	c := testCluster(t)
	spec := testSpec(t)
	spec.Ports = []int{8080}
	sb := c.newSandbox(t, spec)
	ctx := context.Background()
	if err := sb.WriteFile(ctx, "www/index.html", []byte("hello from the pod"), 0o644); err != nil {
		t.Fatal(err)
	}
	u, err := sb.PortURL(ctx, 8080)
	if err != nil {
		t.Fatal(err)
	}
	// Nothing listens in the Pod yet: the connection fails, the forward
	// (and the URL recorded in the state) stays.
	for range 5 {
		if resp, err := http.Get(u); err == nil {
			resp.Body.Close()
			t.Fatal("GET before the server started succeeded")
		}
	}
	execOK(t, sb, "httpd -p 8080 -h /workspace/www")
	if !strings.HasPrefix(u, "http://127.0.0.1:") {
		t.Fatalf("URL %q not on 127.0.0.1", u)
	}
	if body := httpGet(t, u+"/index.html"); body != "hello from the pod" {
		t.Fatalf("GET %s = %q", u, body)
	}
	if u2, err := sb.PortURL(ctx, 8080); err != nil || u2 != u {
		t.Fatalf("second PortURL = %q, %v; want the same forward %q", u2, err, u)
	}
	if _, err := sb.PortURL(ctx, 9999); err == nil {
		t.Fatal("PortURL of an unexposed port succeeded")
	}
	// The forward ends with the sandbox.
	if err := sb.Delete(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := http.Get(u); err == nil {
		t.Fatal("the port-forward outlived Delete")
	}

	spec = testSpec(t)
	spec.Ports = []int{8080}
	spec.Settings = &SandboxSettings{Service: true}
	sb = c.newSandbox(t, spec)
	svc, err := c.cs.CoreV1().Services(c.ns).Get(ctx, sb.Service(), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	u, err = sb.PortURL(ctx, 8080)
	if err != nil || u != "http://"+svc.Spec.ClusterIP+":8080" {
		t.Fatalf("Service URL %q, %v (cluster IP %s)", u, err, svc.Spec.ClusterIP)
	}
	// The Service selects the sandbox's Pod: a Pod in the cluster
	// reaches it at the cluster IP.
	execOK(t, sb, "mkdir -p www && echo via-service > www/index.html && httpd -p 8080 -h /workspace/www")
	client := c.newSandbox(t, testSpec(t))
	var out string
	for i := 0; i < 30 && !strings.HasSuffix(out, "\r\n\r\nvia-service\n"); i++ {
		// BusyBox's wget, statically linked with glibc, crashes in a
		// scratch image: a plain request through nc.
		res, err := client.Exec(ctx, sandbox.ExecRequest{Shell: "printf 'GET /index.html HTTP/1.0\\r\\n\\r\\n' | nc -w 2 " + svc.Spec.ClusterIP + " 8080"})
		if err != nil {
			t.Fatal(err)
		}
		out = string(res.Stdout)
	}
	if !strings.HasSuffix(out, "\r\n\r\nvia-service\n") {
		t.Fatalf("GET %s from another Pod = %q", u, out)
	}
	// Cluster IPs route from this machine too (kube-proxy runs here).
	if body := httpGet(t, u+"/index.html"); body != "via-service\n" {
		t.Fatalf("GET %s from the host = %q", u, body)
	}
	if err := sb.Delete(ctx); err != nil {
		t.Fatal(err)
	}
	if left := c.labelled(t, spec.Lineage); len(left) != 0 {
		t.Fatalf("left after Delete: %v", left)
	}
}

func httpGet(t *testing.T, u string) string {
	t.Helper()
	var last error
	for i := 0; i < 50; i++ {
		resp, err := http.Get(u)
		if err == nil {
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			return string(b)
		}
		last = err
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("GET %s: %v", u, last)
	return ""
}

// Drift: a Pod whose image was changed behind agentctl's back plans a
// replace.
func TestDriftImageChanged(t *testing.T) {
	t.Parallel()
	c := testCluster(t)
	spec := testSpec(t)
	sb := c.newSandbox(t, spec)
	ctx := context.Background()
	if why, err := sb.Drift(ctx, spec); err != nil || why != "" {
		t.Fatalf("fresh sandbox drifts: %q %v", why, err)
	}
	pod, err := c.cs.CoreV1().Pods(c.ns).Get(ctx, sb.Pod(), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pod.Spec.Containers[0].Image = k8stest.UsersImage
	if _, err := c.cs.CoreV1().Pods(c.ns).Update(ctx, pod, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	why, err := sb.Drift(ctx, spec)
	if err != nil || !strings.Contains(why, "changed to \""+k8stest.UsersImage+"\" outside agentctl") {
		t.Fatalf("Drift = %q, %v", why, err)
	}
}

// TestDeleteWhereItWasMade: a sandbox is deleted in the namespace it was
// made in, also by a provider now set to another namespace (changing the
// namespace replaces the sandbox: the old one must not be left behind).
func TestDeleteWhereItWasMade(t *testing.T) {
	t.Parallel()
	c := testCluster(t)
	ctx := context.Background()
	spec := testSpec(t)
	spec.Ports = []int{8080}
	spec.Settings = &SandboxSettings{Service: true}
	sb, err := c.p.Create(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sb.Delete(context.Background()) })
	other, err := New(ctx, Options{ConfigPath: c.kubeconfig, Namespace: testNamespace(t, c.cs)})
	if err != nil {
		t.Fatal(err)
	}
	old, err := other.Open(ctx, spec, sb.Session())
	if err != nil {
		t.Fatalf("Open through a provider of another namespace: %v", err)
	}
	if err := old.Delete(ctx); err != nil {
		t.Fatal(err)
	}
	if left := c.labelled(t, spec.Lineage); len(left) != 0 {
		t.Fatalf("left in %s: %v", c.ns, left)
	}
}
