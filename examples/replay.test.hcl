# Tests for replay.hcl, offline: agentctl test examples/replay.hcl
#
# The runs are answered from the recorded cassette, so their outputs are
# the recorded ones, byte for byte.

run "replays_the_recording" {
  assert {
    condition     = run.summary.output == "Q3 revenue rose 12% to 4.1M while churn fell to 2%."
    error_message = "run.summary's output is not the recorded one: ${run.summary.output}"
  }
  assert {
    condition     = output.headline == "Revenue Up 12%, Churn Down to 2%"
    error_message = "the headline is not the recorded one: ${output.headline}"
  }
}
