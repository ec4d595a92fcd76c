# Record and replay: a pipeline recorded once against a model, replayed
# offline with byte-identical outputs.
#
#   agentctl apply -auto-approve examples/replay.hcl
#   agentctl test examples/replay.hcl
#
# The provider answers every model call from the cassette in
# cassettes/replay (recorded with agentctl apply -record): no network and
# no API key are needed. A request that was not recorded (edit a run's
# input, say) fails the run, naming the request and where it differs. To
# record anew against a real model, remove the replay line, set
# OPENAI_API_KEY and run agentctl apply -record examples/cassettes/replay.

provider "openai" {
  replay = "cassettes/replay"
}

agent "summarizer" {
  model        = "gpt-test"
  instructions = "Summarize in one short sentence."
}

agent "editor" {
  model        = "gpt-test"
  instructions = "Turn the summary into a headline."
}

run "summary" {
  agent = agent.summarizer
  input = "Q3 revenue was 4.1M, up 12% from Q2; churn fell to 2%."
}

run "headline" {
  agent = agent.editor
  input = "Summary: ${run.summary.output}"
}

output "headline" {
  value = run.headline.output
}
