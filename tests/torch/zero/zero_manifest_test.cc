// A ZeRO checkpoint's manifest (src/torch/zero/zero_manifest.cc): what Save
// writes parses back field by field, and fields the loader would index
// with are refused, naming the file and the field, when they are not
// integers of their range. The end-to-end checks (a saved checkpoint,
// edited, refused by Load) are in tests/torch/zero_test.cc.
#include "torch/zero/zero_manifest.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

namespace kolo::torch {
namespace {

using nlohmann::json;
using ::testing::HasSubstr;

constexpr char kPath[] = "ckpt/zero_manifest.json";

// A parameter of a bucket; its numel is the product of its shape.
json Parameter(const std::string& name, const std::vector<int64_t>& shape,
               int64_t offset) {
  int64_t numel = 1;
  for (int64_t dim : shape) numel *= dim;
  return {
      {"name", name}, {"shape", shape}, {"offset", offset}, {"numel", numel}};
}

// A bucket of two shards.
json Bucket(int64_t elements, int64_t slice, const json& parameters) {
  return {{"elements", elements},
          {"padded", 2 * slice},
          {"slice", slice},
          {"parameters", parameters}};
}

// Two shards of an Adam-trained two-layer MLP, as Save writes them: bucket
// 0 holds fc2 (10 + 160 elements), bucket 1 fc1 (16 + 128).
json SavedManifest() {
  LossScaler::State scaler;
  scaler.scale = 65536;
  scaler.iteration = 30;
  scaler.hysteresis_left = 2;
  return {{"format", kZeroManifestFormat},
          {"version", kZeroManifestVersion},
          {"shards", 2},
          {"world_size", 2},
          {"stage", 2},
          {"optimizer", "adam"},
          {"state", {"exp_avg", "exp_avg_sq"}},
          {"optimizer_step", 30},
          {"steps_taken", 31},
          {"loss_scaler", LossScalerJson(scaler)},
          {"buckets",
           {Bucket(170, 85,
                   {Parameter("fc2.bias", {10}, 0),
                    Parameter("fc2.weight", {10, 16}, 10)}),
            Bucket(144, 72,
                   {Parameter("fc1.bias", {16}, 0),
                    Parameter("fc1.weight", {16, 8}, 16)})}},
          {"files", {"shard0.pt", "shard1.pt"}}};
}

Status Parse(const json& manifest) {
  return ParseZeroManifest(manifest.dump(1), "adam", kPath).status();
}

TEST(ZeroManifestTest, WhatSaveWritesParsesBack) {
  auto manifest = ParseZeroManifest(SavedManifest().dump(1), "adam", kPath);
  ASSERT_TRUE(manifest.ok()) << manifest.status().ToString();
  EXPECT_EQ(manifest->files,
            (std::vector<std::string>{"shard0.pt", "shard1.pt"}));
  EXPECT_EQ(manifest->elements, (std::vector<int64_t>{170, 144}));
  EXPECT_EQ(manifest->slices, (std::vector<int64_t>{85, 72}));
  ASSERT_EQ(manifest->places.size(), 4u);
  const ManifestPlace& fc1_weight = manifest->places.at("fc1.weight");
  EXPECT_EQ(fc1_weight.bucket, 1);
  EXPECT_EQ(fc1_weight.offset, 16);
  EXPECT_EQ(fc1_weight.shape, (std::vector<int64_t>{16, 8}));
  EXPECT_EQ(manifest->state_names,
            (std::vector<std::string>{"exp_avg", "exp_avg_sq"}));
  EXPECT_EQ(manifest->optimizer_step, 30);
  EXPECT_EQ(manifest->steps_taken, 31);
  EXPECT_EQ(manifest->scaler.scale, 65536);
  EXPECT_EQ(manifest->scaler.iteration, 30);
  EXPECT_EQ(manifest->scaler.hysteresis_left, 2);
  EXPECT_EQ(manifest->scaler.last_overflow_iteration, -1);

  EXPECT_TRUE(CheckSameModel(*manifest,
                             {{"fc1.bias", {16}},
                              {"fc1.weight", {16, 8}},
                              {"fc2.bias", {10}},
                              {"fc2.weight", {10, 16}}},
                             kPath)
                  .ok());
  Status other = CheckSameModel(*manifest,
                                {{"fc1.bias", {16}},
                                 {"fc1.weight", {8, 16}},
                                 {"fc2.bias", {10}},
                                 {"fc2.weight", {10, 16}}},
                                kPath);
  EXPECT_THAT(other.message(),
              HasSubstr("parameter fc1.weight has shape [16,8]; in this model "
                        "it is [8,16]"));
}

// nlohmann's get<int64_t>() took a float with a static_cast, undefined
// behaviour out of int64_t's range (UBSan stopped the fuzzer on a shape of
// 1e300) and a silent truncation inside it (an offset of 10.5 read as 10),
// and wrapped unsigned numbers past INT64_MAX to negative ones. Found by
// fuzz/zero_manifest_fuzzer.cc; its input is
// fuzz/regressions/zero_manifest_fuzzer/float_dimension_1e300.
TEST(ZeroManifestTest, FieldsThatAreNotInt64IntegersAreRefusedByName) {
  const struct {
    const char* field;
    json value;
    const char* expected;
  } cases[] = {
      {"/buckets/1/parameters/0/shape/0", 1e300,
       "bucket 1 parameter fc1.bias: shape[0] is 1e+300; it must be an "
       "integer from -9223372036854775808 to 9223372036854775807"},
      {"/buckets/0/parameters/1/offset", 10.5,
       "bucket 0 parameter fc2.weight: offset is 10.5; it must be an integer"},
      {"/buckets/0/slice", 85.0, "bucket 0: slice is 85.0; it must be"},
      {"/shards", uint64_t{18446744073709551615u},
       "shards is 18446744073709551615; it must be an integer"},
      {"/steps_taken", "31", "steps_taken is \"31\"; it must be an integer"},
      {"/loss_scaler/hysteresis_left", int64_t{1} << 32,
       "loss_scaler.hysteresis_left is 4294967296; it must be an integer "
       "from -2147483648 to 2147483647"},
  };
  for (const auto& c : cases) {
    json manifest = SavedManifest();
    manifest[json::json_pointer(c.field)] = c.value;
    Status status = Parse(manifest);
    EXPECT_EQ(status.code(), StatusCode::kInvalidArgument) << c.field;
    EXPECT_THAT(status.message(),
                HasSubstr(std::string("checkpoint manifest ") + kPath + ": " +
                          c.expected));
  }

  const std::string found = std::string(KOLO_SOURCE_DIR) +
                            "/fuzz/regressions/zero_manifest_fuzzer/"
                            "float_dimension_1e300";
  std::ifstream file(found);
  ASSERT_TRUE(file.good()) << found;
  std::ostringstream text;
  text << file.rdbuf();
  Status status = ParseZeroManifest(text.str(), "adam", kPath).status();
  EXPECT_EQ(status.code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("shape[0] is 1e+300"));
}

}  // namespace
}  // namespace kolo::torch
