package addrs

import (
	"errors"
	"strings"
	"testing"
)

func TestRoundTrip(t *testing.T) {
	cases := []struct {
		addr Address
		text string
	}{
		{Run("review", nil), `run.review`},
		{Run("review", StringKey("a")), `run.review["a"]`},
		{Run("shard", IntKey(0)), `run.shard[0]`},
		{Run("shard", IntKey(12)), `run.shard[12]`},
		{Sandbox("web", nil), `sandbox.web`},
		{Sandbox("web", StringKey(`say "hi"`)), `sandbox.web["say \"hi\""]`},
		{Sandbox("web", StringKey(`back\slash`)), `sandbox.web["back\\slash"]`},
		{Sandbox("web", StringKey("tab\there\nnl")), `sandbox.web["tab\there\nnl"]`},
		{Sandbox("web", StringKey("a.b[0]")), `sandbox.web["a.b[0]"]`},
		{Sandbox("web", StringKey("")), `sandbox.web[""]`},
		{Run("r", StringKey("é ü")), `run.r["é ü"]`},
		{Agent{Name: "analyst"}, `agent.analyst`},
		{Agent{Name: "my-agent_2"}, `agent.my-agent_2`},
		{Provider{Type: "openai"}, `provider.openai`},
		{Provider{Type: "openai", Alias: "fast"}, `provider.openai.fast`},
		{Capability{Type: "shell", Name: "dev"}, `capability.shell.dev`},
		{Chat{Name: "default"}, `chat.default`},
		{Instance{Module: Module{"a", "b"}, Type: KindRun, Name: "x", Key: StringKey("k")}, `module.a.module.b.run.x["k"]`},
		{Agent{Module: Module{"team"}, Name: "a"}, `module.team.agent.a`},
		{Provider{Module: Module{"m"}, Type: "docker", Alias: "gpu"}, `module.m.provider.docker.gpu`},
	}
	for _, c := range cases {
		if got := c.addr.String(); got != c.text {
			t.Errorf("%#v.String() = %s, want %s", c.addr, got, c.text)
		}
		back, err := Parse(c.text)
		if err != nil {
			t.Errorf("Parse(%s): %v", c.text, err)
			continue
		}
		if back.String() != c.text || back.Kind() != c.addr.Kind() {
			t.Errorf("Parse(%s) = %#v, which prints %s", c.text, back, back)
		}
	}
}

func TestParseFields(t *testing.T) {
	a, err := ParseInstance(`run.review["x \"y\""]`)
	if err != nil {
		t.Fatal(err)
	}
	if a.Type != KindRun || a.Name != "review" || a.Key != StringKey(`x "y"`) || !a.Module.IsRoot() {
		t.Fatalf("ParseInstance = %#v", a)
	}
	if a.Block().String() != "run.review" {
		t.Fatalf("Block() = %s", a.Block())
	}
	n, err := ParseInstance(`run.shard[3]`)
	if err != nil || n.Key != IntKey(3) {
		t.Fatalf("ParseInstance(run.shard[3]) = %#v, %v", n, err)
	}
	p, err := ParseProvider("provider.openai.fast")
	if err != nil || p.Type != "openai" || p.Alias != "fast" || p.Name() != "openai.fast" {
		t.Fatalf("ParseProvider = %#v, %v", p, err)
	}
	c, err := ParseCapability("capability.compaction.long")
	if err != nil || c.Type != "compaction" || c.Name != "long" || c.Key() != "compaction.long" {
		t.Fatalf("ParseCapability = %#v, %v", c, err)
	}
	ag, err := ParseAgent("agent.a")
	if err != nil || ag.Name != "a" {
		t.Fatalf("ParseAgent = %#v, %v", ag, err)
	}
	ch, err := ParseChat("chat.s1")
	if err != nil || ch.Name != "s1" {
		t.Fatalf("ParseChat = %#v, %v", ch, err)
	}
}

func TestSelects(t *testing.T) {
	block := Run("r", nil)
	inst := Run("r", StringKey("a"))
	if !block.Selects(inst) || !block.Selects(block) || !inst.Selects(inst) {
		t.Fatal("a block address selects its instances and an instance itself")
	}
	if inst.Selects(block) || inst.Selects(Run("r", StringKey("b"))) || block.Selects(Run("rr", nil)) || block.Selects(Sandbox("r", nil)) {
		t.Fatal("Selects matched a different object")
	}
	if Run("r", IntKey(1)).Selects(Run("r", StringKey("1"))) {
		t.Fatal("an index selected a string key")
	}
}

func TestParseErrors(t *testing.T) {
	cases := []struct{ in, want string }{
		{"", "expected an address kind"},
		{"run", "expected a dot after run"},
		{"run.", "expected a run name at the end"},
		{"bogus.x", `unknown kind "bogus"`},
		{"run.1x", `expected a run name at "1x"`},
		{`run.r["a"`, "expected ] after the instance key"},
		{`run.r["a]`, "not a complete quoted string"},
		{`run.r[a]`, "quoted string or a non-negative integer"},
		{`run.r[-1]`, "quoted string or a non-negative integer"},
		{`run.r[01]`, "not a valid non-negative integer"},
		{`run.r["a"].x`, `unexpected ".x" after run.r["a"]`},
		{`run.r["\q"]`, "instance key"},
		{"agent.a.b", `unexpected ".b" after agent.a`},
		{"agent.a[0]", `unexpected "[0]" after agent.a`},
		{"capability.shell", "expected a dot after capability.shell"},
		{"provider.openai.", "expected a provider alias"},
		{`module.m["k"].run.r`, "modules with for_each or count are not supported"},
		{"module.m", "expected a dot after module.m"},
	}
	for _, c := range cases {
		_, err := Parse(c.in)
		var pe *Error
		if !errors.As(err, &pe) || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "invalid address") {
			t.Errorf("Parse(%q) = %v, want an *Error mentioning %q", c.in, err, c.want)
		}
	}
	if _, err := ParseInstance("agent.a"); err == nil || !strings.Contains(err.Error(), "expected a run or sandbox address (run.NAME, sandbox.NAME, optionally with an instance key such as [\"key\"] or [0]), not a reference to agent") {
		t.Errorf("ParseInstance(agent.a) = %v", err)
	}
	if _, err := ParseProvider("run.x"); err == nil || !strings.Contains(err.Error(), "expected a provider address") {
		t.Errorf("ParseProvider(run.x) = %v", err)
	}
}
