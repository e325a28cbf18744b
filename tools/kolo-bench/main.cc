// kolo-bench: kolo's benchmarks behind one binary, one subcommand each.
// Run it under a launcher (`kolorun -np 2 kolo-bench collectives`); without
// one it runs as a single-rank world. `kolo-bench report` runs alone and
// turns their --json files into one HTML page.
#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <exception>
#include <functional>
#include <memory>
#include <vector>

#include "checkpoint.h"
#include "collectives.h"
#include "command.h"
#include "elastic.h"
#include "fusion.h"
#include "kolo/build_info.h"
#include "link.h"
#include "pipeline.h"
#include "python.h"
#include "report.h"
#include "soak.h"
#include "study.h"
#include "train.h"
#include "zero.h"

namespace kolo::bench {
namespace {

// A subcommand: its CLI11 app, and what runs it once parsed.
struct Command {
  CLI::App* app;
  std::function<int()> run;
};

// A run's exit status: a command's own, or through CommandExit for a
// command that returns a Status (or a StatusOr: its record).
int ExitStatus(const CLI::App&, int status) { return status; }
int ExitStatus(const CLI::App& app, const Status& status) {
  return CommandExit(app.get_name().c_str(), status);
}
template <typename T>
int ExitStatus(const CLI::App& app, const StatusOr<T>& result) {
  return ExitStatus(app, result.status());
}

// Registers a subcommand with `add`, its flags kept alive by the Command,
// which runs it with `run`.
template <typename Flags, typename Result>
Command AddCommand(CLI::App& app, CLI::App* (*add)(CLI::App&, Flags*),
                   Result (*run)(const Flags&)) {
  auto flags = std::make_shared<Flags>();
  CLI::App* cmd = add(app, flags.get());
  return {cmd, [cmd, flags, run] { return ExitStatus(*cmd, run(*flags)); }};
}

// Every subcommand, in the order --help lists them.
std::vector<Command> AddCommands(CLI::App& app) {
  return {AddCommand(app, AddCollectivesCommand, RunCollectivesCommand),
          AddCommand(app, AddFusionCommand, RunFusionCommand),
          AddCommand(app, AddLinkCommand, RunLinkCommand),
          AddCommand(app, AddTrainCommand, RunTrain),
          AddCommand(app, AddZeroCommand, RunZero),
          AddCommand(app, AddPipelineCommand, RunPipeline),
          AddCommand(app, AddCheckpointCommand, RunCheckpoint),
          AddCommand(app, AddElasticCommand, RunElastic),
          AddCommand(app, AddSoakCommand, RunSoak),
          AddCommand(app, AddPythonCommand, RunPythonStudy),
          AddCommand(app, AddStudyCommand, RunStudyCommand),
          AddCommand(app, AddReportCommand, RunReportCommand)};
}

}  // namespace
}  // namespace kolo::bench

int main(int argc, char** argv) {
  CLI::App app{"kolo-bench: kolo's benchmarks, and a report of their results"};
  app.set_version_flag("--version",
                       [] { return kolo::VersionText("kolo-bench"); });
  app.require_subcommand(1);
  const std::vector<kolo::bench::Command> commands =
      kolo::bench::AddCommands(app);

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // --help exits 0; every flag error exits 1, like the errors found later,
    // so scripts see only the statuses the subcommands document.
    return app.exit(e) == 0 ? 0 : 1;
  }

  // The edge of the program: anything thrown below (running out of memory
  // for a large --maxbytes, say) becomes an error line and a failed exit.
  try {
    for (const kolo::bench::Command& command : commands) {
      if (command.app->parsed()) return command.run();
    }
  } catch (const std::exception& e) {
    fmt::print(stderr, "kolo-bench: {}\n", e.what());
    return 1;
  }
  return 1;
}
