package scripted

import (
	"context"
	"strings"
	"testing"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"

	"github.com/agentctl/agentctl/model"
)

func decode(t *testing.T, src string) (*ProviderSettings, hcl.Diagnostics) {
	t.Helper()
	f, diags := hclsyntax.ParseConfig([]byte(src), "main.hcl", hcl.InitialPos)
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	s, diags := DecodeProvider(f.Body)
	return s.(*ProviderSettings), diags
}

func reply(t *testing.T, settings any, agent string) string {
	t.Helper()
	m := settings.(*ProviderSettings).Model()
	r, err := m.Respond(context.Background(), &model.Request{Agent: agent}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return r.Text()
}

func TestRunScopedScriptWinsForItsRun(t *testing.T) {
	s, diags := decode(t, `
script "analyst" {
  reply { text = "agent-wide" }
}
script "analyst" {
  run = "followup"
  reply { text = "for followup" }
}
script "writer" {
  reply { text = "writer" }
}
`)
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	if got := reply(t, s, "analyst"); got != "agent-wide" {
		t.Errorf("unscoped reply = %q", got)
	}
	scoped, ok := s.ForRun("followup")
	if !ok {
		t.Fatal("ForRun(followup) is not scoped")
	}
	if got := reply(t, scoped, "analyst"); got != "for followup" {
		t.Errorf("followup reply = %q", got)
	}
	// Agents without a scoped script keep their agent-wide one.
	if got := reply(t, scoped, "writer"); got != "writer" {
		t.Errorf("followup writer reply = %q", got)
	}
	if other, ok := s.ForRun("first"); ok || other != any(s) {
		t.Errorf("ForRun(first) = %v, %v; want the settings themselves", other, ok)
	}
	// The fingerprint of the scoped settings is the scoped script, so a
	// run's digest covers the script it uses.
	fp := scoped.(*ProviderSettings).Fingerprint("analyst")["script"].([]ScriptReply)
	if len(fp) != 1 || fp[0].Text != "for followup" {
		t.Errorf("scoped fingerprint = %+v", fp)
	}
	if fp := s.Fingerprint("analyst")["script"].([]ScriptReply); fp[0].Text != "agent-wide" {
		t.Errorf("agent-wide fingerprint = %+v", fp)
	}
	runs := s.ScriptRuns()
	if r, ok := runs["followup"]; !ok || r.Start.Line != 6 {
		t.Errorf("ScriptRuns = %v", runs)
	}
	// The original settings are unchanged by ForRun.
	if got := reply(t, s, "analyst"); got != "agent-wide" {
		t.Errorf("unscoped reply after ForRun = %q", got)
	}
}

func TestRunScopedScriptOnlyForItsRun(t *testing.T) {
	s, diags := decode(t, `
script "analyst" {
  run = "followup"
  reply { text = "for followup" }
}
`)
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	_, err := s.Model().Respond(context.Background(), &model.Request{Agent: "analyst"}, nil)
	if err == nil || !strings.Contains(err.Error(), `no script for agent "analyst"`) {
		t.Fatalf("err = %v", err)
	}
}

func TestScriptDiagnostics(t *testing.T) {
	for name, tc := range map[string]struct{ src, want string }{
		"duplicate scoped": {`
script "analyst" {
  run = "followup"
  reply { text = "a" }
}
script "analyst" {
  run = "followup"
  reply { text = "b" }
}`, `already has a script for agent "analyst" scoped to run "followup"`},
		"duplicate agent-wide": {`
script "analyst" {
  reply { text = "a" }
}
script "analyst" {
  reply { text = "b" }
}`, `already has a script for agent "analyst"`},
		"empty run": {`
script "analyst" {
  run = ""
  reply { text = "a" }
}`, "can't be empty"},
		"run not a string": {`
script "analyst" {
  run = ["a"]
  reply { text = "a" }
}`, "Unsuitable value type"},
	} {
		t.Run(name, func(t *testing.T) {
			_, diags := decode(t, tc.src)
			if !diags.HasErrors() || !strings.Contains(diags.Error(), tc.want) {
				t.Fatalf("diags = %v, want %q", diags, tc.want)
			}
			if diags[0].Subject == nil || diags[0].Subject.Start.Line < 2 {
				t.Errorf("diagnostic not located: %+v", diags[0].Subject)
			}
		})
	}
}

func TestChatScopedScriptWinsForItsSession(t *testing.T) {
	s, diags := decode(t, `
script "analyst" {
  reply { text = "agent-wide" }
}
script "analyst" {
  chat = "demo"
  reply { text = "for demo" }
}
script "analyst" {
  run = "followup"
  reply { text = "for followup" }
}
`)
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	scoped, ok := s.ForChat("demo")
	if !ok {
		t.Fatal("ForChat(demo) is not scoped")
	}
	if got := reply(t, scoped, "analyst"); got != "for demo" {
		t.Errorf("demo reply = %q", got)
	}
	if other, ok := s.ForChat("other"); ok || other != any(s) {
		t.Errorf("ForChat(other) = %v, %v; want the settings themselves", other, ok)
	}
	if got := reply(t, s, "analyst"); got != "agent-wide" {
		t.Errorf("unscoped reply = %q", got)
	}
	// A chat scope is not a run scope.
	if _, ok := s.ForRun("demo"); ok {
		t.Error("ForRun(demo) is scoped by a chat script")
	}
}

func TestChatScopeDiagnostics(t *testing.T) {
	for src, want := range map[string]string{
		`script "a" {
  chat = ""
  reply { text = "x" }
}`: "Invalid chat",
		`script "a" {
  chat = "s"
  run = "r"
  reply { text = "x" }
}`: "Conflicting script scope",
		`script "a" {
  chat = "s"
  reply { text = "x" }
}
script "a" {
  chat = "s"
  reply { text = "y" }
}`: `scoped to chat session "s"`,
	} {
		_, diags := decode(t, src)
		if !strings.Contains(diags.Error(), want) {
			t.Errorf("%s:\ndiagnostics %v, want %q", src, diags, want)
		}
	}
}
