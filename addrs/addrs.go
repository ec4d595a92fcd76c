// Package addrs holds the typed addresses of the objects a configuration
// declares and the state records: run and sandbox instances, agents,
// providers, capabilities and chat sessions.
//
// An address prints as the reference a configuration writes and the key
// the state file uses, e.g. run.review, run.review["a"], run.shard[0],
// sandbox.web, agent.analyst, provider.openai.fast, capability.shell.dev,
// chat.default. Parse reads that text back; String and Parse round-trip.
//
// Every address carries the path of the module it is declared in. It is
// empty for the root module (the only module today) and prints nothing;
// an object in a module prints with one module.NAME. step per call, e.g.
// module.review.run.check.
package addrs

import (
	"fmt"
	"strconv"
	"strings"
)

// Kind is the first word of an address.
type Kind string

// The kinds of address.
const (
	KindRun        Kind = "run"
	KindSandbox    Kind = "sandbox"
	KindAgent      Kind = "agent"
	KindProvider   Kind = "provider"
	KindCapability Kind = "capability"
	KindChat       Kind = "chat"
)

// moduleWord is the first word of a module step.
const moduleWord = "module"

// Address is any typed address.
type Address interface {
	// Kind is the address's first word after its module path.
	Kind() Kind
	// String is the address as configurations and the state write it.
	String() string
}

// Module is the path of module calls an object is declared in, outermost
// first; nil is the root module.
type Module []string

// IsRoot reports whether m is the root module.
func (m Module) IsRoot() bool { return len(m) == 0 }

// String is the module path as an address prefix without its final dot,
// e.g. module.a.module.b; "" for the root module.
func (m Module) String() string {
	var b strings.Builder
	m.writePrefix(&b)
	return strings.TrimSuffix(b.String(), ".")
}

func (m Module) writePrefix(b *strings.Builder) {
	for _, name := range m {
		b.WriteString(moduleWord + ".")
		b.WriteString(name)
		b.WriteByte('.')
	}
}

// Equal reports whether m and o are the same path.
func (m Module) Equal(o Module) bool {
	if len(m) != len(o) {
		return false
	}
	for i := range m {
		if m[i] != o[i] {
			return false
		}
	}
	return true
}

// Key is an instance key: a StringKey for an instance of a block with
// for_each, an IntKey for one with count. A block with neither has a nil
// Key.
type Key interface {
	// String is the key as it follows the name, e.g. ["a"] or [0].
	String() string
	isKey()
}

// StringKey is a for_each instance key.
type StringKey string

// String is the key quoted in brackets, with Go string escapes as the
// state file has always written them, e.g. ["a \"b\""].
func (k StringKey) String() string { return "[" + strconv.Quote(string(k)) + "]" }
func (StringKey) isKey()           {}

// IntKey is a count instance index.
type IntKey int

// String is the index in brackets, e.g. [0].
func (k IntKey) String() string { return "[" + strconv.Itoa(int(k)) + "]" }
func (IntKey) isKey()           {}

// keyString is k's text, or "" for no key.
func keyString(k Key) string {
	if k == nil {
		return ""
	}
	return k.String()
}

// Instance is the address of a run or sandbox instance:
// [module path.]KIND.NAME[KEY].
type Instance struct {
	Module Module
	// Type is KindRun or KindSandbox.
	Type Kind
	Name string
	// Key is nil for a block without for_each or count.
	Key Key
}

// Run is the address of run NAME's instance KEY (nil for none) in the
// root module.
func Run(name string, key Key) Instance {
	return Instance{Type: KindRun, Name: name, Key: key}
}

// Sandbox is the address of sandbox NAME's instance KEY (nil for none) in
// the root module.
func Sandbox(name string, key Key) Instance {
	return Instance{Type: KindSandbox, Name: name, Key: key}
}

// Kind is KindRun or KindSandbox.
func (a Instance) Kind() Kind { return a.Type }

func (a Instance) String() string {
	var b strings.Builder
	a.Module.writePrefix(&b)
	b.WriteString(string(a.Type) + "." + a.Name + keyString(a.Key))
	return b.String()
}

// Block is the address of the block a is an instance of: a without its
// key.
func (a Instance) Block() Instance {
	a.Key = nil
	return a
}

// Equal reports whether a and o are the same instance.
func (a Instance) Equal(o Instance) bool {
	return a.Type == o.Type && a.Name == o.Name && a.Module.Equal(o.Module) && keyString(a.Key) == keyString(o.Key)
}

// Selects reports whether a, given as a -target, names o: the same
// instance, or, when a has no key, any instance of the same block.
func (a Instance) Selects(o Instance) bool {
	if a.Key == nil {
		return a.Equal(o.Block())
	}
	return a.Equal(o)
}

// Agent is the address of an agent: [module path.]agent.NAME.
type Agent struct {
	Module Module
	Name   string
}

// Kind is KindAgent.
func (Agent) Kind() Kind { return KindAgent }

func (a Agent) String() string { return prefixed(a.Module, KindAgent, a.Name) }

// Provider is the address of a provider configuration:
// [module path.]provider.TYPE or provider.TYPE.ALIAS.
type Provider struct {
	Module Module
	Type   string
	// Alias is "" for a provider's default configuration.
	Alias string
}

// Kind is KindProvider.
func (Provider) Kind() Kind { return KindProvider }

func (a Provider) String() string { return prefixed(a.Module, KindProvider, a.Name()) }

// Name is the address without its module path and provider word: TYPE or
// TYPE.ALIAS, as configurations key their providers.
func (a Provider) Name() string {
	if a.Alias == "" {
		return a.Type
	}
	return a.Type + "." + a.Alias
}

// Capability is the address of a capability:
// [module path.]capability.TYPE.NAME.
type Capability struct {
	Module Module
	Type   string
	Name   string
}

// Kind is KindCapability.
func (Capability) Kind() Kind { return KindCapability }

func (a Capability) String() string { return prefixed(a.Module, KindCapability, a.Key()) }

// Key is TYPE.NAME, as configurations key their capabilities.
func (a Capability) Key() string { return a.Type + "." + a.Name }

// Chat is the address of a chat session kept in the state: chat.NAME.
type Chat struct {
	Module Module
	Name   string
}

// Kind is KindChat.
func (Chat) Kind() Kind { return KindChat }

func (a Chat) String() string { return prefixed(a.Module, KindChat, a.Name) }

func prefixed(m Module, k Kind, rest string) string {
	var b strings.Builder
	m.writePrefix(&b)
	b.WriteString(string(k) + "." + rest)
	return b.String()
}

// Error is a parse error: the text and what is wrong with it.
type Error struct {
	Input  string
	Reason string
}

func (e *Error) Error() string {
	return fmt.Sprintf("invalid address %q: %s", e.Input, e.Reason)
}
