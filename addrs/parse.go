package addrs

import (
	"fmt"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Parse reads an address of any kind, as String writes it.
func Parse(s string) (Address, error) {
	p := &parser{in: s, rest: s}
	a, err := p.address()
	if err != nil {
		return nil, &Error{Input: s, Reason: err.Error()}
	}
	if p.rest != "" {
		return nil, &Error{Input: s, Reason: fmt.Sprintf("unexpected %q after %s", p.rest, a)}
	}
	return a, nil
}

// ParseInstance reads a run or sandbox instance address.
func ParseInstance(s string) (Instance, error) {
	return parseAs[Instance](s, "a run or sandbox address (run.NAME, sandbox.NAME, optionally with an instance key such as [\"key\"] or [0])")
}

// ParseAgent reads an agent address.
func ParseAgent(s string) (Agent, error) {
	return parseAs[Agent](s, "an agent address (agent.NAME)")
}

// ParseProvider reads a provider address.
func ParseProvider(s string) (Provider, error) {
	return parseAs[Provider](s, "a provider address (provider.TYPE or provider.TYPE.ALIAS)")
}

// ParseCapability reads a capability address.
func ParseCapability(s string) (Capability, error) {
	return parseAs[Capability](s, "a capability address (capability.TYPE.NAME)")
}

// ParseChat reads a chat session address.
func ParseChat(s string) (Chat, error) {
	return parseAs[Chat](s, "a chat session address (chat.NAME)")
}

func parseAs[T Address](s, want string) (T, error) {
	var zero T
	a, err := Parse(s)
	if err != nil {
		return zero, err
	}
	t, ok := a.(T)
	if !ok {
		return zero, &Error{Input: s, Reason: fmt.Sprintf("expected %s, not a reference to %s", want, a.Kind())}
	}
	return t, nil
}

// parser consumes rest, a suffix of in.
type parser struct {
	in, rest string
}

func (p *parser) address() (Address, error) {
	var mod Module
	for {
		word, err := p.ident("an address kind (run, sandbox, agent, provider, capability, chat or module)")
		if err != nil {
			return nil, err
		}
		if err := p.dot(word); err != nil {
			return nil, err
		}
		if word == moduleWord {
			name, err := p.ident("a module name")
			if err != nil {
				return nil, err
			}
			if strings.HasPrefix(p.rest, "[") {
				return nil, fmt.Errorf("module %s has an instance key; modules with for_each or count are not supported", name)
			}
			if err := p.dot("module." + name); err != nil {
				return nil, err
			}
			mod = append(mod, name)
			continue
		}
		switch k := Kind(word); k {
		case KindRun, KindSandbox:
			name, err := p.ident("a " + word + " name")
			if err != nil {
				return nil, err
			}
			key, err := p.key()
			if err != nil {
				return nil, err
			}
			return Instance{Module: mod, Type: k, Name: name, Key: key}, nil
		case KindAgent:
			name, err := p.ident("an agent name")
			return Agent{Module: mod, Name: name}, err
		case KindChat:
			name, err := p.ident("a chat session name")
			return Chat{Module: mod, Name: name}, err
		case KindProvider:
			typ, err := p.ident("a provider type")
			if err != nil {
				return nil, err
			}
			a := Provider{Module: mod, Type: typ}
			if strings.HasPrefix(p.rest, ".") {
				p.rest = p.rest[1:]
				a.Alias, err = p.ident("a provider alias after provider." + typ + ".")
			}
			return a, err
		case KindCapability:
			typ, err := p.ident("a capability type")
			if err != nil {
				return nil, err
			}
			if err := p.dot("capability." + typ); err != nil {
				return nil, err
			}
			name, err := p.ident("a capability name after capability." + typ + ".")
			return Capability{Module: mod, Type: typ, Name: name}, err
		default:
			return nil, fmt.Errorf("unknown kind %q: an address starts with run, sandbox, agent, provider, capability, chat or module", word)
		}
	}
}

// ident reads an identifier as HCL names are: a letter or underscore,
// then letters, digits, combining marks, connector punctuation and
// dashes.
func (p *parser) ident(what string) (string, error) {
	n := 0
	for i, r := range p.rest {
		ok := unicode.IsLetter(r) || r == '_' || i > 0 && (r == '-' || unicode.In(r, unicode.Nd, unicode.Mn, unicode.Mc, unicode.Pc))
		if !ok {
			break
		}
		n = i + utf8.RuneLen(r)
	}
	if n == 0 {
		if p.rest == "" {
			return "", fmt.Errorf("expected %s at the end", what)
		}
		return "", fmt.Errorf("expected %s at %q", what, p.rest)
	}
	id := p.rest[:n]
	p.rest = p.rest[n:]
	return id, nil
}

func (p *parser) dot(after string) error {
	if !strings.HasPrefix(p.rest, ".") {
		return fmt.Errorf("expected a dot after %s", after)
	}
	p.rest = p.rest[1:]
	return nil
}

// key reads an optional instance key: ["string"] with Go escapes, or a
// non-negative [integer].
func (p *parser) key() (Key, error) {
	if !strings.HasPrefix(p.rest, "[") {
		return nil, nil
	}
	body := p.rest[1:]
	var k Key
	var n int
	switch {
	case strings.HasPrefix(body, `"`):
		q, err := strconv.QuotedPrefix(body)
		if err != nil {
			return nil, fmt.Errorf("instance key %s is not a complete quoted string", body)
		}
		s, err := strconv.Unquote(q)
		if err != nil {
			return nil, fmt.Errorf("instance key %s: %v", q, err)
		}
		k, n = StringKey(s), len(q)
	default:
		for n < len(body) && body[n] >= '0' && body[n] <= '9' {
			n++
		}
		if n == 0 {
			return nil, fmt.Errorf("instance key must be a quoted string or a non-negative integer, not %s", p.rest)
		}
		i, err := strconv.Atoi(body[:n])
		if err != nil || n > 1 && body[0] == '0' {
			return nil, fmt.Errorf("instance index %s is not a valid non-negative integer", body[:n])
		}
		k = IntKey(i)
	}
	if !strings.HasPrefix(body[n:], "]") {
		return nil, fmt.Errorf("expected ] after the instance key %s", body[:n])
	}
	p.rest = body[n+1:]
	return k, nil
}
