// ScratchDir's life cycle and RunJob's reading of a job's JSON, with
// /bin/sh standing in for kolo-train.
#include "job_runner.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "scratch_dir.h"

namespace kolo::bench {
namespace {

namespace fs = std::filesystem;

TEST(ScratchDirTest, RemovedWithEverythingInItWhenItGoes) {
  fs::path kept;
  {
    StatusOr<ScratchDir> dir = ScratchDir::Create("test");
    ASSERT_TRUE(dir.ok()) << dir.status().ToString();
    kept = dir->path();
    EXPECT_EQ(kept.filename().string().rfind("kolo-bench-test-", 0), 0u);
    std::ofstream(*dir / "file.txt") << "x";
    fs::create_directory(*dir / "sub");
    ScratchDir moved = *std::move(dir);
    EXPECT_EQ(moved.path(), kept);
    EXPECT_TRUE(fs::exists(kept / "file.txt"));
  }
  EXPECT_FALSE(fs::exists(kept));
}

TEST(JobErrorTest, NamesWhatIsWrongAndQuotesTheOutputsEnd) {
  const Status error = JobError("line 1\nline 2\n", "no result.memory");
  EXPECT_EQ(error.code(), StatusCode::kInternal);
  EXPECT_EQ(error.message(),
            "no result.memory; the job's output ends:\n  line 1\n  line 2");
}

// A job that writes `text` to the JSON path and prints a line.
std::vector<std::string> Writes(const std::string& text,
                                const fs::path& json_path) {
  return {"sh", "-c",
          "echo job ran; printf '%s' '" + text + "' > " + json_path.string()};
}

TEST(RunJobTest, ReadsTheResultObject) {
  StatusOr<ScratchDir> dir = ScratchDir::Create("test");
  ASSERT_TRUE(dir.ok());
  const fs::path json_path = *dir / "result.json";
  const std::string log = (*dir / "log.txt").string();
  StatusOr<JobOutput> out =
      RunJob(Writes(R"({"result": {"images_per_second": 5}})", json_path),
             json_path.string(), log);
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ(out->json["result"]["images_per_second"], 5);
  EXPECT_NE(out->output.find("job ran"), std::string::npos);
}

TEST(RunJobTest, ObjectWithoutResultIsAnErrorQuotingTheOutput) {
  StatusOr<ScratchDir> dir = ScratchDir::Create("test");
  ASSERT_TRUE(dir.ok());
  const fs::path json_path = *dir / "result.json";
  const std::string log = (*dir / "log.txt").string();
  StatusOr<JobOutput> out =
      RunJob(Writes(R"({"resets": 1})", json_path), json_path.string(), log);
  ASSERT_FALSE(out.ok());
  EXPECT_NE(out.status().message().find("wrote no result JSON"),
            std::string::npos);
  EXPECT_NE(out.status().message().find("job ran"), std::string::npos);
  // kolo-train --elastic's report has no "result": any object will do.
  out = RunJob(Writes(R"({"resets": 1})", json_path), json_path.string(), log,
               JobJson::kObject);
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ(out->json["resets"], 1);
  out = RunJob(Writes("not json", json_path), json_path.string(), log,
               JobJson::kObject);
  EXPECT_FALSE(out.ok());
}

TEST(RunJobTest, RecordsAreANonEmptyArrayOfObjects) {
  StatusOr<ScratchDir> dir = ScratchDir::Create("test");
  ASSERT_TRUE(dir.ok());
  const fs::path json_path = *dir / "records.json";
  const std::string log = (*dir / "log.txt").string();
  // kolo-bench collectives --json appends its record to an array.
  StatusOr<JobOutput> out =
      RunJob(Writes(R"([{"rows": []}, {"rows": [1]}])", json_path),
             json_path.string(), log, JobJson::kRecords);
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ(out->json.back()["rows"][0], 1);
  for (const char* wrong : {"[]", "[1]", R"({"rows": []})"}) {
    out = RunJob(Writes(wrong, json_path), json_path.string(), log,
                 JobJson::kRecords);
    ASSERT_FALSE(out.ok()) << wrong;
    EXPECT_NE(out.status().message().find("wrote no record JSON"),
              std::string::npos)
        << out.status().message();
  }
}

TEST(OutputTailTest, QuotesTheLastLinesIndented) {
  EXPECT_EQ(OutputTail("a\nb\nc\n", 2), "\n  b\n  c");
  EXPECT_EQ(OutputTail("", 2), "");
}

}  // namespace
}  // namespace kolo::bench
