// Package builtin assembles the provider types agentctl ships: the model
// providers openai and scripted, the sandbox providers local, docker,
// daytona, e2b and kubernetes.
package builtin

import (
	"github.com/agentctl/agentctl/providers/daytona"
	"github.com/agentctl/agentctl/providers/docker"
	"github.com/agentctl/agentctl/providers/e2b"
	"github.com/agentctl/agentctl/providers/kubernetes"
	"github.com/agentctl/agentctl/providers/local"
	"github.com/agentctl/agentctl/providers/openai"
	"github.com/agentctl/agentctl/providers/registry"
	"github.com/agentctl/agentctl/providers/scripted"
)

// Registry returns a new registry of the built-in provider types.
func Registry() *registry.Registry {
	return registry.New(openai.Type(), scripted.Type(), local.Type(), docker.Type(), daytona.Type(), e2b.Type(), kubernetes.Type())
}
