# frozen_string_literal: true

# Loaded by middle through SPEC_OPTS' `--require` (orchestrator/checks/runners/rspec.py): adds
# rspec's JSON formatter, writing to MIDDLE_RSPEC_JSON, beside the run's own formatters. A
# `--format` in SPEC_OPTS would replace the formatters of the command line and of .rspec (the
# person reading the output would lose theirs); added here, once rspec has set up its own
# formatters (or its default, progress), it is one more.
module MiddleRspecReport
  # `{pid}` in the path is this rspec process's id: behind a wrapper (make, a script) that runs
  # rspec more than once, each run keeps its own report instead of overwriting the last one's
  def self.path
    ENV.fetch("MIDDLE_RSPEC_JSON").gsub("{pid}", Process.pid.to_s)
  end

  def setup_default(output_stream, deprecation_stream)
    super
    add "json", MiddleRspecReport.path
  end
end

loader = defined?(RSpec::Core::Formatters::Loader) && RSpec::Core::Formatters::Loader
if loader && (loader.method_defined?(:setup_default) || loader.private_method_defined?(:setup_default))
  loader.prepend(MiddleRspecReport) # rspec 3
elsif defined?(RSpec.configure) # another rspec: the report still, the run's own formatters perhaps not
  RSpec.configure { |config| config.add_formatter("json", MiddleRspecReport.path) }
end
