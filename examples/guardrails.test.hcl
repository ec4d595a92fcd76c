# Tests for guardrails.hcl, offline: agentctl test examples/guardrails.hcl
#
# run.leak's output guardrail trips, so the apply fails: expect_failures
# says that failure is the expected outcome, and the assertions check it.

run "leak_is_stopped" {
  expect_failures = [run.leak]

  assert {
    condition     = run.leak.status == "guardrail_tripped"
    error_message = "run.leak should be stopped by its output guardrail, got ${run.leak.status}"
  }
  assert {
    condition     = can(regex("guardrail \"no_keys\" tripped", run.leak.error))
    error_message = "run.leak's error should name the guardrail: ${run.leak.error}"
  }
  assert {
    condition     = run.summary.status == "completed" && run.summary.output == "Prices rose 3% in Q3."
    error_message = "run.summary should pass every guardrail"
  }
}
