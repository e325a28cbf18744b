// kolo-train's checkpoint header as fields (tools/kolo-train/
// checkpoint_header.cc), without LibTorch: what SaveCheckpoint writes
// parses back, and every field that is missing, of another kind or out of
// range is refused naming the file and the field. checkpoint_test.cc
// checks the same through real archives.
#include "checkpoint_header.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <functional>
#include <string>

namespace kolo::train {
namespace {

using ::testing::HasSubstr;

constexpr char kPath[] = "ckpt/checkpoint.pt";

CheckpointInfo SavedRun() {
  CheckpointInfo info;
  info.epochs_done = 2;
  info.seed = 0xFFFFFFFFFFFFFFFFu;  // every bit of the seed travels
  info.model = "mlp";
  info.dataset = "fashion-mnist";
  info.optimizer = "sgd";
  info.history_json =
      R"([{"epoch":1,"train_loss":0.61},{"epoch":2,"train_loss":0.47}])";
  return info;
}

TEST(CheckpointHeaderTest, WhatSaveWritesParsesBack) {
  const HeaderFields fields = ToHeaderFields(SavedRun());
  ASSERT_EQ(fields.size(), std::size(kCheckpointHeaderKeys));
  EXPECT_EQ(fields.at("seed").kind, kIntKind);
  EXPECT_EQ(fields.at("seed").integer, -1);
  EXPECT_EQ(fields.at("history").kind, kStringKind);
  auto info = ParseCheckpointHeader(fields, kPath);
  ASSERT_TRUE(info.ok()) << info.status().ToString();
  EXPECT_EQ(info->epochs_done, 2);
  EXPECT_EQ(info->seed, 0xFFFFFFFFFFFFFFFFu);
  EXPECT_EQ(info->model, "mlp");
  EXPECT_EQ(info->dataset, "fashion-mnist");
  EXPECT_EQ(info->optimizer, "sgd");
  EXPECT_EQ(info->history_json, SavedRun().history_json);
}

// Refused with a message "checkpoint <path>: header field <expected>".
void ExpectRefused(const std::function<void(HeaderFields&)>& edit,
                   const std::string& expected) {
  HeaderFields fields = ToHeaderFields(SavedRun());
  edit(fields);
  Status status = ParseCheckpointHeader(fields, kPath).status();
  EXPECT_EQ(status.code(), StatusCode::kInvalidArgument) << expected;
  EXPECT_THAT(status.message(), HasSubstr(std::string("checkpoint ") + kPath +
                                          ": header field " + expected));
}

TEST(CheckpointHeaderTest, BadFieldsAreNamed) {
  ExpectRefused([](HeaderFields& f) { f.erase("dataset"); },
                "dataset is missing");
  ExpectRefused(
      [](HeaderFields& f) {
        f["epochs_done"] = {"String", 0, "2"};
      },
      "epochs_done is a String, not an integer");
  ExpectRefused([](HeaderFields& f) { f["epochs_done"].integer = -3; },
                "epochs_done is -3; it must be at least 0");
  ExpectRefused(
      [](HeaderFields& f) {
        f["model_name"] = {"Double", 0, ""};
      },
      "model_name is a Double, not a string");
  ExpectRefused([](HeaderFields& f) { f["history"].text = "{}"; },
                "history is not a JSON array");
  ExpectRefused([](HeaderFields& f) { f["history"].text = "[{}"; },
                "history is not a JSON array");
}

// kolo-train parses a resumed history and, when no epoch is left to run,
// reports its last record's train_loss with json::value(), which throws on
// a record that is not an object or a train_loss that is not a number. The
// header passed any array, so such a checkpoint was resumed and the run
// failed at its end with nlohmann's message, which names neither the file
// nor the field. Found by fuzz/checkpoint_header_fuzzer.cc on a history of
// [1,2] (fuzz/regressions/checkpoint_header_fuzzer/history_of_numbers, the
// provider's encoding of these fields).
TEST(CheckpointHeaderTest, HistoryRecordsAreObjectsWithANumericLoss) {
  ExpectRefused([](HeaderFields& f) { f["history"].text = "[1,2]"; },
                "history record 0 is a number, not an object");
  ExpectRefused(
      [](HeaderFields& f) {
        f["history"].text = R"([{"epoch":1,"train_loss":0.5},null])";
      },
      "history record 1 is a null, not an object");
  ExpectRefused(
      [](HeaderFields& f) {
        f["history"].text = R"([{"epoch":1,"train_loss":"0.5"}])";
      },
      "history record 0 has a train_loss that is a string, not a number");
  // Records without a train_loss, and empty histories, are a run's own.
  for (const char* history : {"[]", R"([{"epoch":1}])"}) {
    HeaderFields fields = ToHeaderFields(SavedRun());
    fields["history"].text = history;
    EXPECT_TRUE(ParseCheckpointHeader(fields, kPath).ok()) << history;
  }
}

}  // namespace
}  // namespace kolo::train
