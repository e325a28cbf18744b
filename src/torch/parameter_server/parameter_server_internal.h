// The state behind kolo::torch::ParameterServer, shared by the worker side
// (parameter_server.cc) and the server's loop (server.cc), and the wire
// format both speak (kolo/torch_parameter_server.h describes the protocol).
#ifndef KOLO_TORCH_PARAMETER_SERVER_PARAMETER_SERVER_INTERNAL_H_
#define KOLO_TORCH_PARAMETER_SERVER_PARAMETER_SERVER_INTERNAL_H_

#include <torch/torch.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "kolo/point_to_point.h"
#include "kolo/torch_parameter_server.h"

namespace kolo::torch {

namespace ps_wire {
// Tags, from kParameterServerTagBase.
inline constexpr int32_t kRequestTag = kParameterServerTagBase;  // w -> s
inline constexpr int32_t kGradientTag = kParameterServerTagBase + 1;
inline constexpr int32_t kReplyTag = kParameterServerTagBase + 2;  // s -> w
inline constexpr int32_t kValueTag = kParameterServerTagBase + 3;

// Every message's receive is posted before its sender can send it: a
// worker posts its pull before it pushes, a server reposts a worker's
// receives before answering it, and the start's receives are posted before
// a barrier. So no message ever waits unmatched at its receiver, and none
// can meet a receive meant for the next message of its tag.
//
// A header is kHeaderWords int64: kind, step, staleness, and on a push the
// learning rate the worker asks for (a double's bits; 0: the options').
inline constexpr int64_t kHeaderWords = 4;
enum Kind : int64_t {
  kInit = 1,    // worker 0's initial values follow, one message per shard
  kPush = 2,    // this worker's gradients of step `step` follow
  kFinish = 3,  // the worker is done
  kReply = 4,   // the server's values follow; `staleness` as recorded
};
}  // namespace ps_wire

namespace internal {

struct ParameterServerState {
  struct Parameter {
    std::string name;
    ::torch::Tensor tensor;  // the model's own
    DataType type = DataType::kFloat32;
  };

  ParameterServerOptions options;
  int32_t rank = 0;
  bool is_server = false;
  int32_t role_index = 0;
  std::vector<int32_t> servers;
  std::vector<int32_t> workers;
  std::vector<Parameter> parameters;
  std::vector<std::vector<ParameterShard>> placement;
  bool finished = false;     // worker: Finish() was called
  double learning_rate = 0;  // worker: sent with each push; 0: the options'
  ParameterServerStatistics statistics;

  // "parameter server rank 5 (server 1 of 2, holding fc1.weight[0, 50), b)"
  std::string DescribeServer(int32_t server) const;
  // "worker rank 2 (worker 2 of 4)"
  std::string DescribeWorker(int32_t worker) const;
  // A contiguous copy of elements [offset, offset + count) of `tensor`
  // flattened (zeros when `tensor` is undefined).
  ::torch::Tensor Slice(const ::torch::Tensor& tensor,
                        const ParameterShard& shard) const;
  int64_t Bytes(const ParameterShard& shard) const;

  // Server (server.cc): posts the receives of worker 0's initial values,
  // before the world's barrier lets worker 0 send them; then serves.
  Status PrepareServer();
  Status Serve();
  std::shared_ptr<class ServerLoop> server_loop;
};

}  // namespace internal

}  // namespace kolo::torch

#endif  // KOLO_TORCH_PARAMETER_SERVER_PARAMETER_SERVER_INTERNAL_H_
