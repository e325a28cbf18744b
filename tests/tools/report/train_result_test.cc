// The training result schema both ways: what kolo-train writes reads back
// the same, unknown keys travel untouched, and each malformed key is named
// with the file it came from.
#include "train_result.h"

#include <gtest/gtest.h>

namespace kolo::bench {
namespace {

using nlohmann::json;

TrainResult EpochRun() {
  TrainResult r;
  r.images_per_second = 1250.5;
  r.images_per_second_per_worker = 625.25;
  r.peak_rss_bytes = std::vector<int64_t>{1 << 20, 3 << 20};
  RankMemory memory;
  memory.optimizer_state_bytes = std::vector<int64_t>{100, 300};
  memory.gradient_bytes = std::vector<int64_t>{50, 70};
  memory.master_weight_bytes = std::vector<int64_t>{0, 0};
  r.memory = memory;
  r.test_accuracy = 0.875;
  r.test_correct = 875;
  r.test_total = 1000;
  r.train_loss = 0.25;
  r.wall_seconds = 12.5;
  r.train_seconds = 10;
  r.images_trained = 12505;
  r.skipped_steps = 0;
  r.loss_scale = 1;
  r.parameter_checksum = "0x1234";
  return r;
}

TEST(TrainResultTest, WritesTheKeysKoloBenchReads) {
  const json j = ToJson(EpochRun());
  EXPECT_EQ(j["images_per_second"], 1250.5);
  EXPECT_EQ(j["test_correct"], 875);
  EXPECT_TRUE(j["test_correct"].is_number_integer());
  EXPECT_EQ(j["memory"]["gradient_bytes"], json({50, 70}));
  EXPECT_EQ(j["parameter_checksum"], "0x1234");
  // Unset fields are left out, not written as 0.
  EXPECT_FALSE(j.contains("step_ms"));
  EXPECT_FALSE(j.contains("phase_ms"));
}

TEST(TrainResultTest, RoundTripsEveryField) {
  TrainResult r = EpochRun();
  r.step_ms = 4.5;
  r.seconds = 2;
  r.communication_seconds = 0.5;
  r.negotiation_seconds = 0.125;
  r.waiting_seconds = 0.25;
  r.final_loss = 1.5;
  r.phase_ms = StepPhases{1, 2, 3, 4};
  r.extra["pipeline"] = {{"bubble_fraction", 0.25}};
  r.memory->extra["parameter_bytes"] = {400, 200};
  const json written = ToJson(r);
  StatusOr<TrainResult> read = TrainResultFromJson(written, "result.json");
  ASSERT_TRUE(read.ok()) << read.status().ToString();
  EXPECT_EQ(ToJson(*read), written);
  EXPECT_EQ(read->phase_ms->backward, 3);
  EXPECT_EQ(read->extra["pipeline"]["bubble_fraction"], 0.25);
  EXPECT_EQ(*read->test_total, 1000);
  EXPECT_EQ(read->memory->extra["parameter_bytes"], json({400, 200}));
}

TEST(TrainResultTest, AJobsFileNeedsAResult) {
  const json job = {{"tool", "kolo-train"}, {"result", ToJson(EpochRun())}};
  StatusOr<TrainResult> read = TrainResultOfJob(job, "a.json");
  ASSERT_TRUE(read.ok()) << read.status().ToString();
  EXPECT_EQ(read->test_accuracy, 0.875);
  StatusOr<TrainResult> none = TrainResultOfJob({{"tool", "x"}}, "a.json");
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.status().message(), "a.json: no result in its JSON");
}

// Each bad key's error names the file and the key.
TEST(TrainResultTest, ParseErrorsNameTheFileAndTheKey) {
  struct Case {
    const char* key;
    json value;
    const char* message;
  };
  const Case cases[] = {
      {"step_ms", "fast", "r.json: result.step_ms is \"fast\", not a number"},
      {"test_correct", 8.5,
       "r.json: result.test_correct is 8.5, not an integer"},
      {"peak_rss_bytes", json({1, -2}),
       "r.json: result.peak_rss_bytes is [1,-2]: not all non-negative "
       "integers"},
      {"memory", json::parse(R"({"gradient_bytes": [1.5]})"),
       "r.json: result.memory.gradient_bytes is [1.5]: not all non-negative "
       "integers"},
      {"phase_ms", json({{"data", "x"}}),
       "r.json: result.phase_ms.data is \"x\", not a number"},
      {"parameter_checksum", 7,
       "r.json: result.parameter_checksum is 7, not a string"}};
  for (const Case& c : cases) {
    json result = ToJson(EpochRun());
    result[c.key] = c.value;
    StatusOr<TrainResult> read = TrainResultFromJson(result, "r.json");
    ASSERT_FALSE(read.ok()) << c.key;
    EXPECT_EQ(read.status().code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(read.status().message(), c.message);
  }
  json no_rate = ToJson(EpochRun());
  no_rate.erase("images_per_second");
  EXPECT_EQ(TrainResultFromJson(no_rate, "r.json").status().message(),
            "r.json: no result.images_per_second");
  EXPECT_EQ(TrainResultFromJson(json::array(), "r.json").status().message(),
            "r.json: result is [], not an object");
}

}  // namespace
}  // namespace kolo::bench
