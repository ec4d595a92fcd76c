// Package pgtest starts a private PostgreSQL cluster for tests: initdb
// and pg_ctl on a free port of 127.0.0.1, with a data directory of its
// own, stopped and removed by Stop. A TestMain calls Start once and
// hands the tests the connection string, or the reason no server could
// be started, which Require turns into a skip (a failure under
// AGENTCTL_TEST_STRICT=1, see internal/testenv).
package pgtest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentctl/agentctl/internal/testenv"
)

// Server is a running private cluster.
type Server struct {
	// ConnString reaches the cluster's postgres database as its
	// superuser, with trust authentication on 127.0.0.1 only.
	ConnString string
	Port       int

	bin  string // the directory holding initdb, pg_ctl and postgres
	dir  string // holds data/ and the server log
	user *user.User
}

// Start initializes and starts a cluster. When the machine cannot run
// one (no PostgreSQL binaries, root without a postgres user), it returns
// a nil Server and the reason; err is for a cluster that should have
// started and did not.
func Start(ctx context.Context) (srv *Server, skip string, err error) {
	bin := findBin()
	if bin == "" {
		return nil, "no PostgreSQL server binaries (initdb, pg_ctl) under /usr/lib/postgresql/*/bin or in PATH; install Debian's postgresql package", nil
	}
	s := &Server{bin: bin}
	if os.Geteuid() == 0 {
		// PostgreSQL refuses to run as root: run it as postgres.
		u, err := user.Lookup("postgres")
		if err != nil {
			return nil, "running as root and there is no postgres user to run the server as (install Debian's postgresql package, which creates it)", nil
		}
		s.user = u
	}
	dir, err := os.MkdirTemp("", "agentctl-pgtest-")
	if err != nil {
		return nil, "", fmt.Errorf("pgtest: %w", err)
	}
	s.dir = dir
	defer func() {
		if err != nil {
			s.Stop()
		}
	}()
	if s.user != nil {
		uid, _ := strconv.Atoi(s.user.Uid)
		gid, _ := strconv.Atoi(s.user.Gid)
		if err := os.Chown(dir, uid, gid); err != nil {
			return nil, "", fmt.Errorf("pgtest: giving %s to the postgres user: %w", dir, err)
		}
	}
	if out, err := s.run(ctx, "initdb", "-D", s.data(), "-U", "agentctl", "--auth=trust", "-E", "UTF8", "--no-sync", "--locale=C"); err != nil {
		return nil, "", fmt.Errorf("pgtest: initdb: %w\n%s", err, out)
	}
	port, err := freePort()
	if err != nil {
		return nil, "", err
	}
	s.Port = port
	s.ConnString = fmt.Sprintf("postgres://agentctl@127.0.0.1:%d/postgres?sslmode=disable", port)
	if err := s.start(ctx); err != nil {
		return nil, "", err
	}
	return s, "", nil
}

func (s *Server) data() string { return filepath.Join(s.dir, "data") }

func (s *Server) start(ctx context.Context) error {
	opts := fmt.Sprintf("-c listen_addresses=127.0.0.1 -p %d -k %s -c max_connections=200", s.Port, s.dir)
	if out, err := s.run(ctx, "pg_ctl", "-D", s.data(), "-l", filepath.Join(s.dir, "server.log"), "-o", opts, "-w", "-t", "60", "start"); err != nil {
		log, _ := os.ReadFile(filepath.Join(s.dir, "server.log"))
		return fmt.Errorf("pgtest: pg_ctl start: %w\n%s\n%s", err, out, log)
	}
	return nil
}

// Restart stops the server at once (every connection is cut, as when
// the database goes away) and starts it again after pause.
func (s *Server) Restart(ctx context.Context, pause time.Duration) error {
	if out, err := s.run(ctx, "pg_ctl", "-D", s.data(), "-m", "immediate", "-w", "stop"); err != nil {
		return fmt.Errorf("pgtest: pg_ctl stop: %w\n%s", err, out)
	}
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(pause):
	}
	return s.start(ctx)
}

// Stop stops the server and removes its data directory.
func (s *Server) Stop() error {
	if s == nil {
		return nil
	}
	var errs []error
	if _, err := os.Stat(filepath.Join(s.data(), "postmaster.pid")); err == nil {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if out, err := s.run(ctx, "pg_ctl", "-D", s.data(), "-m", "immediate", "-w", "stop"); err != nil {
			errs = append(errs, fmt.Errorf("pgtest: pg_ctl stop: %w\n%s", err, out))
		}
	}
	if err := os.RemoveAll(s.dir); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// run runs one of the server's programs, as the postgres user when this
// process is root.
func (s *Server) run(ctx context.Context, prog string, args ...string) ([]byte, error) {
	path := filepath.Join(s.bin, prog)
	var cmd *exec.Cmd
	if s.user != nil {
		cmd = exec.CommandContext(ctx, "setpriv", append([]string{"--reuid=" + s.user.Uid, "--regid=" + s.user.Gid, "--clear-groups", "--", path}, args...)...)
	} else {
		cmd = exec.CommandContext(ctx, path, args...)
	}
	cmd.Dir = s.dir
	cmd.Env = append(os.Environ(), "HOME="+s.dir, "LC_ALL=C")
	return cmd.CombinedOutput()
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("pgtest: finding a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// findBin returns the newest /usr/lib/postgresql/N/bin holding initdb,
// or the directory of initdb in PATH, or "".
func findBin() string {
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Slice(dirs, func(i, j int) bool {
		a, _ := strconv.Atoi(filepath.Base(filepath.Dir(dirs[i])))
		b, _ := strconv.Atoi(filepath.Base(filepath.Dir(dirs[j])))
		return a > b
	})
	for _, d := range dirs {
		if isExec(filepath.Join(d, "initdb")) && isExec(filepath.Join(d, "pg_ctl")) {
			return d
		}
	}
	if p, err := exec.LookPath("initdb"); err == nil {
		if r, err := filepath.EvalSymlinks(p); err == nil {
			p = r
		}
		d := filepath.Dir(p)
		if isExec(filepath.Join(d, "pg_ctl")) {
			return d
		}
	}
	return ""
}

func isExec(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && !fi.IsDir() && fi.Mode()&0o111 != 0
}

// Shared is a server the tests of a package share, started by the
// first test that needs it: a TestMain calls Stop after m.Run.
type Shared struct {
	once sync.Once
	srv  *Server
	skip string
	err  error
}

// Server returns the shared server, starting it on first use, or stops
// tb: with a skip (a failure under AGENTCTL_TEST_STRICT=1, see
// testenv.Missing) when the machine cannot run one, with a failure when
// it should have started and did not.
func (sh *Shared) Server(tb testing.TB) *Server {
	tb.Helper()
	sh.once.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		sh.srv, sh.skip, sh.err = Start(ctx)
	})
	if sh.err != nil {
		tb.Fatal(sh.err)
	}
	if sh.srv == nil {
		testenv.Missing(tb, "PostgreSQL: %s", strings.TrimSpace(sh.skip))
	}
	return sh.srv
}

// Stop stops the server if it was started.
func (sh *Shared) Stop() error {
	return sh.srv.Stop()
}
