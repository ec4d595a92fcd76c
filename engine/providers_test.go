package engine

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestSandboxProviderDeadDaemon: while provider.docker is being built
// against a daemon that accepts connections and never answers, callers
// needing another provider (or a model) are not held up, and a second
// caller waiting for provider.docker leaves when its own context ends.
// Nothing depends on timing: the test waits on the daemon's accept and
// on contexts only.
func TestSandboxProviderDeadDaemon(t *testing.T) {
	dir, err := os.MkdirTemp("", "dock") // short: a socket path has ~100 bytes
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	sock := filepath.Join(dir, "docker.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	accepted := make(chan net.Conn, 16)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				close(accepted)
				return
			}
			accepted <- c // held open, never answered
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		for c := range accepted {
			c.Close()
		}
	})

	e, _ := newTestEngine(t, fmt.Sprintf(`
provider "docker" { host = "unix://%s" }
provider "local" { isolation = "none" }
provider "scripted" {
  script "a" {
    reply { text = "done" }
  }
}
agent "a" {
  provider     = provider.scripted
  instructions = "x"
}
`, sock))
	ps := e.provs()

	dialCtx, cancelDial := context.WithCancel(context.Background())
	defer cancelDial()
	dialed := make(chan error, 1)
	go func() {
		_, err := ps.sandboxProvider(dialCtx, e, "provider.docker")
		dialed <- err
	}()
	// The daemon has the connection: provider.docker is being built.
	<-accepted

	ctx := context.Background()
	if p, err := ps.sandboxProvider(ctx, e, "provider.local"); err != nil || p.Kind() != "local" {
		t.Fatalf("provider.local while docker is dialed: %v, %v", p, err)
	}
	if m, _, err := ps.model(e, e.Config.Agents["a"], ""); err != nil || m == nil {
		t.Fatalf("model while docker is dialed: %v, %v", m, err)
	}

	// A second caller for provider.docker waits for the first one's
	// build, and gives up when its own context ends.
	waitCtx, cancelWait := context.WithCancel(ctx)
	waited := make(chan error, 1)
	go func() {
		_, err := ps.sandboxProvider(waitCtx, e, "provider.docker")
		waited <- err
	}()
	cancelWait()
	if err := <-waited; !errors.Is(err, context.Canceled) {
		t.Fatalf("waiting caller: %v, want context.Canceled", err)
	}

	// A caller still waiting when the first build ends with its
	// builder's context dials again itself: the failed build is not kept.
	retryCtx, cancelRetry := context.WithCancel(ctx)
	defer cancelRetry()
	retried := make(chan error, 1)
	go func() {
		_, err := ps.sandboxProvider(retryCtx, e, "provider.docker")
		retried <- err
	}()
	cancelDial()
	err = <-dialed
	if err == nil {
		t.Fatal("building provider.docker against a daemon that never answers succeeded")
	}
	if want := "provider.docker: cannot reach the Docker daemon"; !strings.HasPrefix(err.Error(), want) {
		t.Fatalf("error %q, want it to start with %q", err, want)
	}
	<-accepted // the waiting caller's own dial
	cancelRetry()
	if err := <-retried; err == nil {
		t.Fatal("second build against a daemon that never answers succeeded")
	}
}
