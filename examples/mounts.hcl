# A due-diligence data room in a bucket, mounted read-only into the
# sandbox; the agent reads it and writes its summary into another prefix
# of the bucket, mounted read-write. It runs offline: the scripted model
# replays the replies below, and the bucket is the test S3 server's.
# Mounts need rclone and FUSE (apt-get install rclone fuse3) and agentctl
# running as root (docs/mounts.md).
#
#   go run ./internal/objtest/s3server -addr 127.0.0.1:9000 &   # prints the two exports
#   export ROOM_ACCESS_KEY_ID=AKIAEXAMPLEROOM00001 ROOM_SECRET_ACCESS_KEY=example-room-secret
#   agentctl apply -auto-approve examples/mounts.hcl
#   agentctl exec -config=examples/mounts.hcl sandbox.room -- cat summaries/acme.md
#   agentctl destroy -auto-approve examples/mounts.hcl
#
# The summary stays in the bucket (summaries/acme.md) after destroy.

variable "endpoint" {
  type        = string
  default     = "http://127.0.0.1:9000"
  description = "The S3 endpoint: the test server's, or any S3-compatible store's"
}

variable "isolation" {
  type    = string
  default = "namespaces"
}

provider "local" {
  isolation = var.isolation
}

provider "scripted" {
  script "analyst" {
    reply {
      call "exec_command" {
        arguments = { cmd = "ls room/acme && cat room/acme/terms.md room/acme/risks.md && tail -n 1 room/acme/financials.csv" }
      }
    }
    reply {
      call "exec_command" {
        arguments = { cmd = "printf '# Acme: summary\\n\\nPrice 12.5M EUR (room/acme/terms.md); 2024 revenue 6.8M (room/acme/financials.csv); one customer is 35%% of revenue (room/acme/risks.md).\\n' > summaries/acme.md && echo saved" }
      }
    }
    reply {
      call "exec_command" {
        # The data room is read-only: this write is refused (EROFS).
        arguments = { cmd = "echo tampered > room/acme/terms.md" }
      }
    }
    reply { text = "Summary saved to summaries/acme.md, with a citation for each figure." }
  }
}

manifest "room" {
  s3 "room" {
    bucket            = "room"
    prefix            = "deals"
    endpoint          = var.endpoint
    read_only         = true
    access_key_id     = env("ROOM_ACCESS_KEY_ID")
    secret_access_key = env("ROOM_SECRET_ACCESS_KEY")
  }
  s3 "summaries" {
    bucket            = "room"
    prefix            = "summaries"
    endpoint          = var.endpoint
    access_key_id     = env("ROOM_ACCESS_KEY_ID")
    secret_access_key = env("ROOM_SECRET_ACCESS_KEY")
  }
}

sandbox "room" {
  provider = provider.local
  manifest = manifest.room
}

capability "shell" "default" {}

agent "analyst" {
  provider     = provider.scripted
  instructions = "Summarize the data room, citing the file of each figure."
  sandbox      = sandbox.room
  capabilities = [capability.shell.default]
}

run "summary" {
  agent = agent.analyst
  input = "Summarize the Acme deal."
}

output "summary" {
  value = run.summary.output
}
