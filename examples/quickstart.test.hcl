# Tests for quickstart.hcl, offline: agentctl test examples/quickstart.hcl
#
# Each run block applies (or plans) the configuration in a temporary
# state; assert blocks check what the run did. The sandboxes are
# destroyed when the file is done.

run "answers_from_the_data" {
  command = apply # the default

  assert {
    condition     = run.answer.status == "completed"
    error_message = "run.answer did not complete: ${run.answer.error}"
  }
  assert {
    condition     = [for c in run.answer.tool_calls : c.name] == ["exec_command", "exec_command"]
    error_message = "the analyst should have used the shell twice"
  }
  assert {
    condition     = run.answer.tool_calls[0].arguments.cmd == "cat data/sales.csv"
    error_message = "the analyst should have read the data first"
  }
  assert {
    condition     = can(regex("14300000", run.answer.tool_calls[1].output))
    error_message = "the sum over the quarters should be 14300000"
  }
  assert {
    condition     = can(regex("Q3", output.answer))
    error_message = "the answer should name Q3"
  }
  assert {
    condition     = can(regex("Q3,4100000", sandbox_file(sandbox.analysis, "data/sales.csv")))
    error_message = "the manifest's data file should be in the workspace"
  }
}

# A second run with other replies: the scripted provider's script is
# replaced for this run only (override_provider takes a provider "scripted"
# block's body and works on any model provider, openai included).
run "writes_a_report" {
  override_provider "scripted" {
    script "analyst" {
      reply {
        call "exec_command" {
          arguments = { cmd = "echo 'Q3 leads' > output/report.md" }
        }
      }
      reply { text = "Wrote output/report.md." }
    }
  }

  assert {
    condition     = trimspace(sandbox_file(sandbox.analysis, "output/report.md")) == "Q3 leads"
    error_message = "the report should be in the workspace"
  }
  assert {
    condition     = output.answer == "Wrote output/report.md."
    error_message = "the run should have been re-run with the overriding replies"
  }
}
