// kolo-train's checkpoint header: every field present, of its type and in
// range, or the load is refused naming the file and the field.
#include "checkpoint.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <functional>
#include <string>

#include "testing/scratch_dir.h"

namespace kolo::train {
namespace {

using ::testing::HasSubstr;
using testing::ScratchDir;

CheckpointInfo Expected() {
  CheckpointInfo info;
  info.epochs_done = 2;
  info.seed = 7;
  info.model = "mlp";
  info.dataset = "fashion-mnist";
  info.optimizer = "sgd";
  info.history_json = "[{\"epoch\": 1}, {\"epoch\": 2}]";
  return info;
}

// Writes <dir>/checkpoint.pt with the fields SaveCheckpoint writes, less
// `drop`, with `edit` applied to the archive last.
void WriteArchive(
    const std::string& dir, const std::string& drop,
    const std::function<void(::torch::serialize::OutputArchive&)>& edit) {
  ::torch::nn::Linear model(2, 1);
  ::torch::optim::SGD optimizer(model->parameters(), 0.1);
  const CheckpointInfo info = Expected();
  ::torch::serialize::OutputArchive archive;
  ::torch::serialize::OutputArchive model_archive;
  model->save(model_archive);
  archive.write("model", model_archive);
  ::torch::serialize::OutputArchive optimizer_archive;
  optimizer.save(optimizer_archive);
  archive.write("optimizer", optimizer_archive);
  const std::pair<const char*, c10::IValue> fields[] = {
      {"epochs_done", info.epochs_done},
      {"seed", static_cast<int64_t>(info.seed)},
      {"model_name", info.model},
      {"dataset", info.dataset},
      {"optimizer_name", info.optimizer},
      {"history", info.history_json}};
  for (const auto& [key, value] : fields)
    if (key != drop) archive.write(key, value);
  edit(archive);
  archive.save_to(CheckpointPath(dir));
}

Status Load(const std::string& dir) {
  ::torch::nn::Linear model(2, 1);
  ::torch::optim::SGD optimizer(model->parameters(), 0.1);
  return LoadCheckpoint(dir, Expected(), *model, optimizer).status();
}

TEST(CheckpointTest, SavedHeaderLoadsBack) {
  ScratchDir dir("kolo_train_checkpoint");
  ASSERT_FALSE(dir.path().empty());
  ::torch::nn::Linear model(2, 1);
  ::torch::optim::SGD optimizer(model->parameters(), 0.1);
  ASSERT_TRUE(SaveCheckpoint(dir.path(), *model, optimizer, Expected()).ok());
  auto info = LoadCheckpoint(dir.path(), Expected(), *model, optimizer);
  ASSERT_TRUE(info.ok()) << info.status().ToString();
  EXPECT_EQ(info->epochs_done, 2);
  EXPECT_EQ(info->history_json, Expected().history_json);
  WriteArchive(dir.path(), "", [](auto&) {});
  EXPECT_TRUE(Load(dir.path()).ok());
}

TEST(CheckpointTest, BadHeaderFieldsAreNamed) {
  ScratchDir dir("kolo_train_checkpoint");
  ASSERT_FALSE(dir.path().empty());
  const std::string path = CheckpointPath(dir.path());
  const struct {
    const char* drop;
    std::function<void(::torch::serialize::OutputArchive&)> edit;
    const char* expected;
  } cases[] = {
      {"dataset", [](auto&) {}, "header field dataset is missing"},
      {"epochs_done",
       [](auto& a) { a.write("epochs_done", c10::IValue("two")); },
       "header field epochs_done is a String, not an integer"},
      {"epochs_done",
       [](auto& a) { a.write("epochs_done", c10::IValue(int64_t{-3})); },
       "header field epochs_done is -3; it must be at least 0"},
      {"model_name", [](auto& a) { a.write("model_name", c10::IValue(1.5)); },
       "header field model_name is a Double, not a string"},
      {"history", [](auto& a) { a.write("history", c10::IValue("{}")); },
       "header field history is not a JSON array"},
  };
  for (const auto& c : cases) {
    WriteArchive(dir.path(), c.drop, c.edit);
    Status status = Load(dir.path());
    EXPECT_EQ(status.code(), StatusCode::kInvalidArgument) << c.expected;
    EXPECT_THAT(status.message(), HasSubstr("checkpoint " + path + ": "));
    EXPECT_THAT(status.message(), HasSubstr(c.expected));
  }
}

}  // namespace
}  // namespace kolo::train
