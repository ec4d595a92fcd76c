package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/hashicorp/hcl/v2"

	"github.com/agentctl/agentctl/cmd/agentctl/internal/arguments"
	"github.com/agentctl/agentctl/config"
	"github.com/agentctl/agentctl/engine"
	"github.com/agentctl/agentctl/internal/seal"
	"github.com/agentctl/agentctl/state"
	"github.com/agentctl/agentctl/state/local"
)

// backend is what the state-using commands share: the loaded
// configuration, its state directory and, while held, the state lock.
type backend struct {
	m   *meta
	cfg *config.Config
	// dir is the local state directory: the store itself, or what a
	// remote backend keeps on this machine (logs, caches, sandboxes).
	dir *local.Dir
	// store is where the state lives: dir, or the configured backend.
	store state.Store
	lock  state.Lease
}

// stateDirFor is where a configuration's state lives (docs/engine.md):
// DIR/.agentctl for a directory, .agentctl/<stem> beside a single file.
func stateDirFor(cfgPath string) (string, error) {
	abs, err := filepath.Abs(cfgPath)
	if err != nil {
		return "", err
	}
	fi, err := os.Stat(abs)
	if err != nil {
		return "", fmt.Errorf("configuration %s: %w", cfgPath, err)
	}
	if fi.IsDir() {
		return filepath.Join(abs, ".agentctl"), nil
	}
	stem := strings.TrimSuffix(filepath.Base(abs), filepath.Ext(abs))
	return filepath.Join(filepath.Dir(abs), ".agentctl", stem), nil
}

// errDiagnostics is returned after diagnostics have been printed.
var errDiagnostics = exitCode(exitError)

// openBackend loads the configuration at path and opens its state
// directory, printing diagnostics on failure.
func (m *meta) openBackend(path string, vars arguments.Vars, sa arguments.State) (*backend, error) {
	cfg, diags := m.loadConfig(path, vars)
	if diags.HasErrors() {
		m.view().Diagnostics(diags, files(cfg))
		return nil, errDiagnostics
	}
	if ran, err := m.userNamespace(cfg); ran {
		return nil, err
	}
	if len(diags) > 0 {
		m.view().Diagnostics(diags, files(cfg))
	}
	return m.backendFor(path, cfg, sa)
}

// openStateBackend is openBackend for the commands that read or edit only
// the state (state, show, output, force-unlock): a configuration that does
// not load (a required variable not given, a syntax error in the middle of
// an edit) must not lock the user out of the state, so its errors leave
// b.cfg nil instead of failing, and only the parts that need it fail.
func (m *meta) openStateBackend(path string, vars arguments.Vars, sa arguments.State) (*backend, error) {
	cfg, diags := m.loadConfig(path, vars)
	if diags.HasErrors() {
		cfg = nil
	}
	return m.backendFor(path, cfg, sa)
}

// needConfig reports the configuration's errors when a state command needs
// the configuration itself.
func (b *backend) needConfig(path string, vars arguments.Vars, what string) error {
	if b.cfg != nil {
		return nil
	}
	cfg, diags := b.m.loadConfig(path, vars)
	b.m.view().Diagnostics(diags, files(cfg))
	return fmt.Errorf("%s needs the configuration, which has errors (above)", what)
}

func (m *meta) backendFor(path string, cfg *config.Config, sa arguments.State) (*backend, error) {
	sdir, err := stateDirFor(path)
	if err != nil {
		return nil, err
	}
	var opts []local.Option
	opts = append(opts, local.WithAgentctlVersion(config.Version))
	if cfg != nil {
		opts = append(opts, local.WithEncryption(cfg.Settings.Encryption.Keys()))
	}
	if sa.StatePath != "" {
		p, err := filepath.Abs(sa.StatePath)
		if err != nil {
			return nil, err
		}
		opts = append(opts, local.WithStateFile(p))
	}
	dir, err := local.OpenDir(sdir, opts...)
	if err != nil {
		return nil, err
	}
	store, err := m.openStore(cfg, dir, sa)
	if err != nil {
		return nil, err
	}
	m.log.Debug("configuration loaded", "path", path, "state_dir", dir.Path(), "state_file", dir.StateFile())
	return &backend{m: m, cfg: cfg, dir: dir, store: store}, nil
}

// takeLock takes the state lock for operation unless -lock=false.
func (b *backend) takeLock(ctx context.Context, sa arguments.State, operation string) error {
	if !sa.Lock {
		return nil
	}
	b.m.log.Debug("taking the state lock", "operation", operation, "timeout", sa.LockTimeout)
	l, err := b.store.Lock(ctx, state.LockInfo{Operation: operation}, sa.LockTimeout)
	if err != nil {
		return err
	}
	b.lock = l
	return nil
}

// unlock releases the state lock, if held; an interrupt does not stop
// it (ctx's cancellation is ignored).
func (b *backend) unlock(ctx context.Context) {
	if b.lock != nil {
		if err := b.lock.Unlock(context.WithoutCancel(ctx)); err != nil {
			b.m.view().Error(fmt.Errorf("releasing the state lock: %w", err))
		}
		b.lock = nil
	}
}

// engine returns an engine for the backend's configuration and state.
func (b *backend) engine(parallelism int, events func(engine.Event), interrupt <-chan struct{}) *engine.Engine {
	return &engine.Engine{
		Config:      b.cfg,
		State:       b.store,
		Environ:     b.m.Environ,
		Events:      logEvents(b.m.log, events),
		Parallelism: parallelism,
		Version:     config.Version,
		Interrupt:   interrupt,
		Registry:    b.cfg.Registry(),
		// Spans go where OTEL_EXPORTER_OTLP_* say, nowhere when unset.
		TracerProvider: b.m.traces,
	}
}

// interrupts returns a context cancelled by a second SIGINT/SIGTERM and a
// channel closed by the first: runs abandon their model calls in flight,
// let their tool calls in flight finish, checkpoint and stop, as terraform
// apply stops gracefully on the first Ctrl-C.
func interrupts(parent context.Context, onFirst func()) (context.Context, <-chan struct{}, func()) {
	ctx, cancel := context.WithCancel(parent)
	first := make(chan struct{})
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	done := make(chan struct{})
	go func() {
		n := 0
		for {
			select {
			case <-done:
				return
			case <-sigs:
				n++
				if n == 1 {
					close(first)
					if onFirst != nil {
						onFirst()
					}
				} else {
					cancel()
				}
			}
		}
	}()
	return ctx, first, func() {
		signal.Stop(sigs)
		close(done)
		cancel()
	}
}

// printErr prints an error, as diagnostics when it carries them.
func (m *meta) printErr(err error, cfg *config.Config) {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		// errors.Join of several nodes' failures: one diagnostic each.
		for _, e := range j.Unwrap() {
			m.printErr(e, cfg)
		}
		return
	}
	var diags hcl.Diagnostics
	if errors.As(err, &diags) {
		m.view().Diagnostics(diags, files(cfg))
		return
	}
	m.view().Error(err)
}

// lockedState opens the backend of a command that uses a sandbox (exec,
// tool call -sandbox), takes the state lock for operation (unless
// -lock=false, waiting up to -lock-timeout) and reads the state. Holding
// the lock for the whole command is what keeps it from starting, stopping
// or using a sandbox while an apply, a destroy or another exec does. The
// caller must call b.unlock when done with the sandbox.
func (m *meta) lockedState(ctx context.Context, args arguments.Backend, operation string) (*backend, *state.State, error) {
	b, err := m.openBackend(args.Config, args.Vars, args.State)
	if err != nil {
		return nil, nil, err
	}
	if err := b.takeLock(ctx, args.State, operation); err != nil {
		return nil, nil, err
	}
	st, err := b.store.Read(ctx)
	if err != nil {
		b.unlock(ctx)
		return nil, nil, err
	}
	return b, st, nil
}

// readState opens the backend of an inspecting command with open
// (openBackend, or openStateBackend for commands that need only the
// state) and reads its state.
func readState(ctx context.Context, open func(string, arguments.Vars, arguments.State) (*backend, error), args arguments.Backend) (*backend, *state.State, error) {
	b, err := open(args.Config, args.Vars, args.State)
	if err != nil {
		return nil, nil, err
	}
	st, err := b.store.Read(ctx)
	if err != nil {
		if b.cfg == nil && errors.Is(err, seal.ErrNoKey) {
			return nil, nil, fmt.Errorf("%w; the configuration, which holds the encryption block, has errors: fix them first (agentctl validate shows them)", err)
		}
		return nil, nil, err
	}
	return b, st, nil
}
