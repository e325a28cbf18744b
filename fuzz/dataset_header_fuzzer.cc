// Fuzzes the dataset loaders' reading of files a user hands kolo-train
// (src/torch/data/datasets.cc): IDX image and label files (MNIST,
// Fashion-MNIST) and CIFAR-10's binary batches. The loaders read paths, so
// the input is written to files in a scratch folder first. The input's
// last byte picks the format; for IDX the images file comes first in the
// input (a string as libFuzzer's FuzzedDataProvider reads one) and the
// labels file is the rest. Every error must be kInvalidArgument naming the
// file; a dataset read must hold as many labels as images.
#include <fuzzer/FuzzedDataProvider.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "fuzz/loopback.h"
#include "kolo/data.h"

namespace {

const std::string& ScratchDir() {
  static const std::string dir = [] {
    const std::string path =
        "/tmp/kolo-fuzz-datasets-" + std::to_string(::getpid());
    std::filesystem::create_directories(path);
    return path;
  }();
  return dir;
}

std::string WriteFile(const std::string& name, const std::string& bytes) {
  const std::string path = ScratchDir() + "/" + name;
  std::ofstream file(path, std::ios::binary | std::ios::trunc);
  file.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  if (!file.good()) kolo::fuzz::HarnessFailure("fuzz: write a dataset file");
  return path;
}

void Check(const kolo::StatusOr<kolo::data::Dataset>& dataset,
           const std::string& file) {
  if (!dataset.ok()) {
    if (dataset.status().code() != kolo::StatusCode::kInvalidArgument ||
        dataset.status().message().find(file) == std::string::npos) {
      std::fprintf(stderr, "fuzz: an error that does not name %s: %s\n",
                   file.c_str(), dataset.status().ToString().c_str());
      std::abort();
    }
    return;
  }
  if (dataset->images.size(0) != dataset->labels.size(0)) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FuzzedDataProvider input(data, size);
  if (input.ConsumeBool()) {
    const std::string images =
        WriteFile("images-idx3-ubyte", input.ConsumeRandomLengthString());
    const std::string labels =
        WriteFile("labels-idx1-ubyte", input.ConsumeRemainingBytesAsString());
    Check(kolo::data::ReadIdx(images, labels), ScratchDir());
  } else {
    WriteFile("test_batch.bin", input.ConsumeRemainingBytesAsString());
    Check(kolo::data::ReadCifar10(ScratchDir(), /*train=*/false),
          "test_batch.bin");
  }
  return 0;
}
