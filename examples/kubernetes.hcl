# The offline data analyst of docker-offline.hcl in a Kubernetes Pod: the
# same configuration with its provider line changed. The scripted model
# replays the replies below (no API key); the image needs /bin/sh, tar and
# busybox-style tools and must be pullable by (or present on) the nodes.
# What the cluster must allow (a Role and how to bind it):
# docs/kubernetes-provider.md, "RBAC".
#
#   agentctl apply -auto-approve examples/kubernetes.hcl
#   agentctl exec -config=examples/kubernetes.hcl sandbox.box -- cat out/report.md
#   agentctl destroy -auto-approve examples/kubernetes.hcl
#
# The kubeconfig is KUBECONFIG, else ~/.kube/config, else the in-cluster
# configuration; -var namespace=agents picks another namespace.

variable "image" {
  type        = string
  default     = "busybox:1.36"
  description = "Image of the sandbox: needs /bin/sh, tar and busybox-style tools"
}

variable "namespace" {
  type        = string
  default     = "default"
  description = "Namespace the sandbox's Pod is created in"
}

variable "token" {
  type      = string
  default   = "offline-demo-token"
  sensitive = true # never written to state, plans, journals or snapshots
}

provider "scripted" {
  script "analyst" {
    # Turn 1: look at the data; manifest env is set for every command.
    reply {
      call "exec_command" {
        arguments = { cmd = "cat data/sales.csv; echo \"region: $REGION\"" }
      }
    }
    # Turn 2: write a report skeleton with the filesystem capability.
    reply {
      call "apply_patch" {
        arguments = {
          input = <<-PATCH
            *** Begin Patch
            *** Add File: out/report.md
            +# Sales report
            +
            +Total: TBD
            *** End Patch
          PATCH
        }
      }
    }
    # Turn 3: a longer step (interrupt the apply here and apply again: the
    # run resumes from its last checkpoint).
    reply {
      call "exec_command" {
        arguments = { cmd = "sleep 3; awk -F, 'NR>1 {s+=$2} END {print s}' data/sales.csv > out/total.txt; cat out/total.txt" }
      }
    }
    # Turn 4: fill in the total; the token is visible to commands only.
    reply {
      call "exec_command" {
        arguments = { cmd = "sed -i \"s/TBD/$(cat out/total.txt)/\" out/report.md && test -n \"$DB_TOKEN\" && echo token is set" }
      }
    }
    reply {
      text = "Q3 had the highest revenue (4100000); the year totals 14300000. The report is in out/report.md."
    }
  }
}

# KUBECONFIG or ~/.kube/config (its current context), or in-cluster.
provider "kubernetes" {
  namespace      = var.namespace
  create_timeout = "3m" # scheduling, image pull and start
}

manifest "sales" {
  root = "/workspace"
  file "data/sales.csv" {
    content = <<-CSV
      quarter,revenue
      Q1,3200000
      Q2,3500000
      Q3,4100000
      Q4,3500000
    CSV
  }
  dir "out" {}
  env = { REGION = "eu" }
  env "DB_TOKEN" {
    value     = var.token
    ephemeral = true # passed to each command, never stored
  }
}

sandbox "box" {
  provider = provider.kubernetes
  image    = var.image
  manifest = manifest.sales
  ports    = [8080] # forwarded to 127.0.0.1 while agentctl runs: sandbox.box.urls["8080"]
  # The Pod keeps running after apply, for agentctl exec (destroy removes
  # it). With on_exit = "stop" (the default) it is deleted once its
  # workspace is in the snapshot, and the next run that needs it restores
  # it into a new Pod; agentctl exec then says to apply first.
  on_exit = "keep"

  # Keep the workspace on a claim (on_exit = "stop" then deletes only the
  # Pod, and the next apply or exec mounts the claim in a new one):
  # volume {
  #   storage_class = "standard"
  #   size          = "1Gi"
  # }
}

capability "shell" "default" {
  timeout = "60s"
}

capability "filesystem" "default" {} # apply_patch and view_image

agent "analyst" {
  provider     = provider.scripted
  instructions = "You are a data analyst. Inspect the workspace with the shell, write the report to out/report.md."
  sandbox      = sandbox.box
  capabilities = [capability.shell.default, capability.filesystem.default]
  max_turns    = 8
}

run "report" {
  agent = agent.analyst
  input = "Which quarter had the highest revenue, and what is the yearly total? Write out/report.md."
}

output "answer" {
  value = run.report.output
}

output "url" {
  value = sandbox.box.urls["8080"]
}
