package hosted

import (
	"context"
	"errors"
	"testing"

	"github.com/agentctl/agentctl/sandbox"
)

type fakeSettings struct{ N int }

func TestSettingsOf(t *testing.T) {
	if st, err := SandboxSettings[fakeSettings](sandbox.Spec{}); st != nil || err != nil {
		t.Errorf("no settings: got %v, %v; want nil, nil", st, err)
	}
	_, err := SandboxSettings[fakeSettings](sandbox.Spec{Settings: 3})
	if want := "sandbox settings are int, not *hosted.fakeSettings"; err == nil || err.Error() != want {
		t.Errorf("wrong settings: got %v, want %q", err, want)
	}
	_, err = ProviderSettings[fakeSettings](nil)
	if want := "provider settings are <nil>, not *hosted.fakeSettings"; err == nil || err.Error() != want {
		t.Errorf("no provider settings: got %v, want %q", err, want)
	}
}

func TestWorkspaceRoot(t *testing.T) {
	for root, want := range map[string]string{"": "/def", "/a/b/": "/a/b", "rel": "", "/": "", "/a/..": ""} {
		got, err := WorkspaceRoot(root, "/def")
		if got != want || (err == nil) != (want != "") {
			t.Errorf("WorkspaceRoot(%q) = %q, %v; want %q", root, got, err, want)
		}
	}
}

func TestFailedCreate(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	create := errors.New("create failed")
	err := FailedCreate(ctx, create, "devbox", func(ctx context.Context) error {
		if ctx.Err() != nil {
			t.Error("leftovers are removed with the caller's cancelled context")
		}
		return errors.New("list failed")
	})
	if want := "create failed; looking for a devbox the failed create may have made: list failed"; err == nil || err.Error() != want || !errors.Is(err, create) {
		t.Errorf("got %v, want %q wrapping the create's error", err, want)
	}
	if err := FailedCreate(ctx, create, "devbox", func(context.Context) error { return nil }); err != create {
		t.Errorf("got %v, want the create's error alone", err)
	}
}

func TestDiscard(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	setup := errors.New("setup failed")
	err := Discard(ctx, setup, func(ctx context.Context) error {
		if ctx.Err() != nil {
			t.Error("the sandbox is removed with the caller's cancelled context")
		}
		return errors.New("503")
	}, "deleting the sandbox (id sb1)", "delete it in the dashboard")
	if want := "setup failed; deleting the sandbox (id sb1) also failed: 503; delete it in the dashboard"; err == nil || err.Error() != want || !errors.Is(err, setup) {
		t.Errorf("got %v, want %q wrapping the setup's error", err, want)
	}
	if err := Discard(ctx, setup, func(context.Context) error { return nil }, "x", "y"); err != setup {
		t.Errorf("got %v, want the setup's error alone", err)
	}
}

func TestOpenArgs(t *testing.T) {
	ss := sandbox.SessionState{Provider: "p", ID: "id1"}
	st, root, err := OpenArgs[fakeSettings](ss, sandbox.Spec{Settings: &fakeSettings{N: 2}}, "p", "box", "/def")
	if err != nil || st == nil || st.N != 2 || root != "/def" {
		t.Errorf("got %v, %q, %v; want the spec's settings and the default root", st, root, err)
	}
	if _, _, err := OpenArgs[fakeSettings](sandbox.SessionState{Provider: "other", ID: "id1"}, sandbox.Spec{}, "p", "box", "/def"); err == nil {
		t.Error("another provider's session: no error")
	}
	if _, _, err := OpenArgs[fakeSettings](ss, sandbox.Spec{Settings: 1}, "p", "box", "/def"); err == nil {
		t.Error("settings of another type: no error")
	}
	if _, _, err := OpenArgs[fakeSettings](ss, sandbox.Spec{Root: "rel"}, "p", "box", "/def"); err == nil {
		t.Error("a relative root: no error")
	}
}
