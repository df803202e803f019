// tessel local: run a whole training job on this machine, one process per pipeline stage and
// data-parallel replica, every link shaped like the job's topology (noderuntime/launcher).
#include <unistd.h>

#include <memory>

#include "cli/commands.h"
#include "cli/validators.h"
#include "noderuntime/launcher/launcher.h"
#include "noderuntime/launcher/trainingjob_local.h"
#include "noderuntime/stage/device_choice.h"

namespace tessel::cli {
namespace {

struct LocalCommand {
  std::string job_file;
  std::string topology_file;
  launcher::LocalRunOptions options;
  int steps = 0;

  void run() {
    const launcher::LocalJob job = launcher::load_job_file(job_file, topology_file);
    if (options.output_dir.empty()) options.output_dir = launcher::default_output_dir(job);
    if (steps > 0) options.steps = steps;
    options.tty = isatty(STDOUT_FILENO);
    const launcher::LocalRunResult result = launcher::run_local_job(job, options);
    // The exit status of the run (1 failed, 128 + signal stopped) without another message.
    if (result.exit_code != 0) throw CLI::RuntimeError(result.exit_code);
  }
};

// tessel-stage's own check of --device (noderuntime/stage/device_choice.h); CLI11 puts the flag
// in front of the message, so the function's own "--device: " is left out.
CLI::Validator device_request() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        try {
          stage::parse_device_request(text);
          return "";
        } catch (const stage::ConfigError& e) {
          const std::string message = e.what(), flag = "--device: ";
          return message.rfind(flag, 0) == 0 ? message.substr(flag.size()) : message;
        }
      },
      "cpu|cuda|auto");
}

}  // namespace

void add_local_command(CLI::App& app) {
  auto cmd = std::make_shared<LocalCommand>();
  CLI::App* sub = app.add_subcommand(
      "local", "Train a job on this machine: one process per stage x replica, links emulated");
  sub->add_option("job", cmd->job_file,
                  "A TrainingJob manifest (examples/trainingjobs/) or a local job file "
                  "(examples/local/)")
      ->required()
      ->check(CLI::ExistingFile);
  sub->add_option("--topology", cmd->topology_file,
                  "The network to emulate for a TrainingJob manifest (a topology file, e.g. "
                  "examples/local/two-sites.yaml)")
      ->check(CLI::ExistingFile);
  sub->add_option("--output", cmd->options.output_dir,
                  "Folder for the report, trace, logs (default tessel-runs/<job name>)");
  sub->add_option("--placement", cmd->options.placement_file,
                  "Use this placement (`tessel plan --format json`) instead of planning")
      ->check(CLI::ExistingFile);
  sub->add_option("--steps", cmd->steps, "Train this many steps (default: the job's)")
      ->check(count_in(1, placement::kMaxSteps));
  sub->add_flag("--trace", cmd->options.trace,
                "Write trace.json: every rank's timeline (open in ui.perfetto.dev)");
  sub->add_option("--grace", cmd->options.grace_s,
                  "Seconds the stage processes get to stop before they are killed (default 30)")
      ->check(number_in(0, placement::kMaxGraceSeconds, true, "s"));
  sub->add_option("--device", cmd->options.device,
                  "What every stage process computes on: cpu (fp32), cuda (bf16 mixed "
                  "precision; the processes share the GPU) or auto (the default: cuda for a bf16 "
                  "job when a GPU is usable, else cpu, which computes a bf16 job in fp32)")
      ->check(device_request());
  sub->add_option("--stage-binary", cmd->options.stage_binary,
                  "The tessel-stage executable (default: $TESSEL_STAGE_BINARY, else next to "
                  "tessel)");
  sub->callback([cmd] { cmd->run(); });
}

}  // namespace tessel::cli
