// Averages a vector across every rank of the job.
//   kolorun -np 2 ./allreduce_example
#include <cstdio>
#include <vector>

#include "kolo/kolo.h"

int main() {
  if (kolo::Status s = kolo::Init(); !s.ok()) {
    std::fprintf(stderr, "init: %s\n", s.ToString().c_str());
    return 1;
  }
  std::vector<float> gradient(4, static_cast<float>(kolo::Rank()));
  kolo::Status s =
      kolo::Allreduce(gradient.data(), gradient.data(), gradient.size(),
                      kolo::DataType::kFloat32, kolo::ReduceOp::kAverage);
  if (!s.ok()) {
    std::fprintf(stderr, "allreduce: %s\n", s.ToString().c_str());
    return 1;
  }
  std::printf("rank %d of %d: average of ranks = %g\n", kolo::Rank(),
              kolo::Size(), gradient[0]);
  return kolo::Shutdown().ok() ? 0 : 1;
}
