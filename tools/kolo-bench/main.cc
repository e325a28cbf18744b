// kolo-bench: kolo's benchmarks behind one binary, one subcommand each.
// Run it under a launcher (`kolorun -np 2 kolo-bench collectives`); without
// one it runs as a single-rank world. `kolo-bench report` runs alone and
// turns their --json files into one HTML page.
#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <exception>

#include "checkpoint.h"
#include "collectives.h"
#include "elastic.h"
#include "fusion.h"
#include "kolo/build_info.h"
#include "link.h"
#include "pipeline.h"
#include "report.h"
#include "study.h"
#include "train.h"
#include "zero.h"

int main(int argc, char** argv) {
  CLI::App app{"kolo-bench: kolo's benchmarks, and a report of their results"};
  app.set_version_flag("--version",
                       [] { return kolo::VersionText("kolo-bench"); });
  app.require_subcommand(1);

  kolo::bench::CollectivesFlags collectives_flags;
  CLI::App* collectives =
      kolo::bench::AddCollectivesCommand(app, &collectives_flags);
  kolo::bench::FusionFlags fusion_flags;
  CLI::App* fusion = kolo::bench::AddFusionCommand(app, &fusion_flags);
  kolo::bench::LinkFlags link_flags;
  CLI::App* link = kolo::bench::AddLinkCommand(app, &link_flags);
  kolo::bench::TrainFlags train_flags;
  CLI::App* train = kolo::bench::AddTrainCommand(app, &train_flags);
  kolo::bench::ZeroFlags zero_flags;
  CLI::App* zero = kolo::bench::AddZeroCommand(app, &zero_flags);
  kolo::bench::PipelineFlags pipeline_flags;
  CLI::App* pipeline = kolo::bench::AddPipelineCommand(app, &pipeline_flags);
  kolo::bench::CheckpointFlags checkpoint_flags;
  CLI::App* checkpoint =
      kolo::bench::AddCheckpointCommand(app, &checkpoint_flags);
  kolo::bench::ElasticFlags elastic_flags;
  CLI::App* elastic = kolo::bench::AddElasticCommand(app, &elastic_flags);
  kolo::bench::StudyFlags study_flags;
  CLI::App* study = kolo::bench::AddStudyCommand(app, &study_flags);
  kolo::bench::ReportFlags report_flags;
  CLI::App* report = kolo::bench::AddReportCommand(app, &report_flags);

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
    if (collectives->parsed()) {
      return kolo::bench::RunCollectivesCommand(collectives_flags);
    }
    if (fusion->parsed()) {
      return kolo::bench::RunFusionCommand(fusion_flags);
    }
    if (link->parsed()) {
      return kolo::bench::RunLinkCommand(link_flags);
    }
    if (train->parsed()) {
      return kolo::bench::RunTrainCommand(train_flags);
    }
    if (zero->parsed()) {
      return kolo::bench::RunZeroCommand(zero_flags);
    }
    if (pipeline->parsed()) {
      return kolo::bench::RunPipelineCommand(pipeline_flags);
    }
    if (checkpoint->parsed()) {
      return kolo::bench::RunCheckpointCommand(checkpoint_flags);
    }
    if (elastic->parsed()) {
      return kolo::bench::RunElasticCommand(elastic_flags);
    }
    if (study->parsed()) {
      return kolo::bench::RunStudyCommand(study_flags);
    }
    if (report->parsed()) {
      return kolo::bench::RunReportCommand(report_flags);
    }
  } catch (const std::exception& e) {
    fmt::print(stderr, "kolo-bench: {}\n", e.what());
    return 1;
  }
  return 1;
}
