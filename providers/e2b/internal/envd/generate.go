// Package envd holds the Go code generated from the envd daemon's
// vendored .proto files (testdata/spec/envd): the process and filesystem
// services' messages (envd/process, envd/filesystem) and their Connect
// clients and handlers (processconnect, filesystemconnect). It is
// regenerated with go generate (protoc, protoc-gen-go and
// protoc-gen-connect-go on PATH); do not edit the generated files.
package envd

//go:generate sh -c "protoc -I ../../testdata/spec/envd --go_out=. --go_opt=module=github.com/agentctl/agentctl/providers/e2b/internal/envd --connect-go_out=. --connect-go_opt=module=github.com/agentctl/agentctl/providers/e2b/internal/envd --go_opt=Mprocess/process.proto=github.com/agentctl/agentctl/providers/e2b/internal/envd/process --go_opt=Mfilesystem/filesystem.proto=github.com/agentctl/agentctl/providers/e2b/internal/envd/filesystem --connect-go_opt=Mprocess/process.proto=github.com/agentctl/agentctl/providers/e2b/internal/envd/process --connect-go_opt=Mfilesystem/filesystem.proto=github.com/agentctl/agentctl/providers/e2b/internal/envd/filesystem process/process.proto filesystem/filesystem.proto"
