// Pipeline model parallelism for LibTorch: a torch::nn::Sequential cut into
// stages, one stage per rank, with each batch split into micro-batches that
// flow through the stages as GPipe (Huang et al. 2019) or 1F1B
// (PipeDream-flush, Narayanan et al. 2021) schedule them, and optionally
// replicated for data parallelism across the rest of the world.
//
//   KOLO_RETURN_IF_ERROR(kolo::Init());          // world = stages x replicas
//   ::torch::manual_seed(0);                     // same model on every rank
//   ::torch::nn::Sequential model(
//       ::torch::nn::Conv2d(3, 8, 3), ::torch::nn::ReLU(),
//       ::torch::nn::Flatten(), ::torch::nn::Linear(8 * 30 * 30, 10));
//   kolo::torch::PipelineOptions options;
//   options.stages = 2;
//   options.micro_batches = 4;
//   options.schedule = kolo::torch::PipelineSchedule::kOneFOneB;
//   KOLO_ASSIGN_OR_RETURN(std::unique_ptr<kolo::torch::Pipeline> pipeline,
//                         kolo::torch::Pipeline::Create(model, options));
//   ::torch::optim::SGD sgd(pipeline->parameters(), /*lr=*/0.1);
//   for (const auto& batch : shard) {
//     sgd.zero_grad();
//     KOLO_ASSIGN_OR_RETURN(double loss,  // the same on every rank
//                           pipeline->TrainStep(batch.data, batch.target,
//                                               loss_fn));  // a mean over rows
//     sgd.step();                                  // this stage's layers
//     (void)loss;
//   }
//
// The layout. The world's ranks are stages x replicas, and consecutive
// ranks form one pipeline: rank r is stage r % stages of replica
// r / stages, so the ranks of a pipeline usually share a host (activations
// cross shared memory) and the ranks of one stage, which allreduce their
// gradients, are `stages` apart. Replica q's stage s sends activations to
// rank q*stages + s + 1 and gradients to rank q*stages + s - 1.
//
// The split. Each rank keeps only its stage's layers: the layers
// [layers().first, layers().second) of the Sequential, shared with it (not
// copied). PipelineOptions::split gives the number of layers per stage;
// empty, the layers are balanced: contiguous stages whose largest total
// cost is smallest, the cost of a layer being its parameter count
// (Balance::kParameters, the same on every rank by construction) or its
// forward time on a sample micro-batch (Balance::kTime, measured on every
// rank and averaged across the world, so every rank computes the same
// split).
//
// A step (TrainStep, collective over the world). The batch (dimension 0) is
// cut into micro_batches parts whose sizes differ by at most one; the input
// is read on the first stage, the target on the last. Every stage runs its
// plan's actions in order (below); the last stage computes each
// micro-batch's loss with loss_fn, which must be a mean over its rows,
// weighted by the micro-batch's share of the batch, so the losses and the
// gradients add up to those of the unsplit model on the whole batch.
// Gradients accumulate in each parameter's .grad (call zero_grad before the
// step, as without a pipeline). With replicas > 1 each stage's gradients
// are then averaged across its replicas (a kolo::ProcessGroup per stage),
// so equal-sized replica batches give the gradients of the global batch.
// The loss, averaged across replicas, is returned on every rank.
//
// The plan. A PipelinePlan lists, per stage, the actions it runs:
// RecvActivation(m) Forward(m) SendActivation(m) for a forward, and
// RecvGradient(m) Backward(m) SendGradient(m) for a backward, the sends and
// receives only where a neighbouring stage exists. GPipe runs every forward,
// then every backward, so each stage holds the activations of all m
// micro-batches; 1F1B runs min(stages - s - 1, m) forwards at stage s, then
// alternates one forward and one backward, then drains the backwards, so
// stage s holds at most min(stages - s, m) micro-batches, with the same
// bubble. CheckPipelinePlan runs all stages' lists together the way the
// pipeline does (a send never blocks; a receive blocks until its message
// arrives; each channel delivers in send order) and rejects a plan that
// cannot finish, naming the stage and the action.
//
// The wire. Activations and gradients go between neighbouring ranks with
// kolo::Isend/Irecv (kolo/point_to_point.h) as two messages: a header of
// kPipelineHeaderLength int64 (data type, rank, dimensions), then the data,
// so any shape and any dtype kolo moves travels, and the last micro-batch
// may be smaller. Each micro-batch and direction has tags of its own from
// PipelineOptions::tag_base; a step waits for all of its sends before it
// returns, and every wait is bounded by the job's timeout.
//
// Thread-safety: a Pipeline is used by one thread. Create, TrainStep and
// Forward are collective: every rank of the world calls them in the same
// order.
#ifndef KOLO_TORCH_PIPELINE_H_
#define KOLO_TORCH_PIPELINE_H_

#include <torch/torch.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "kolo/status.h"

namespace kolo {
class ProcessGroup;
}  // namespace kolo

namespace kolo::torch {

enum class PipelineSchedule {
  kGPipe,     // all forwards, then all backwards
  kOneFOneB,  // warm-up forwards, then one forward and one backward in turn
};
// "gpipe", "1f1b"
const char* PipelineScheduleName(PipelineSchedule schedule);
StatusOr<PipelineSchedule> ParsePipelineSchedule(const std::string& name);

struct PipelineOptions {
  int32_t stages = 2;
  int32_t micro_batches = 4;
  PipelineSchedule schedule = PipelineSchedule::kOneFOneB;
  // Layers per stage, stages entries adding up to the Sequential's size;
  // empty: balanced as `balance` says.
  std::vector<int64_t> split;
  enum class Balance {
    kParameters,  // by parameter count
    kTime,        // by forward time on the sample micro-batch
  };
  Balance balance = Balance::kParameters;
  // Each stage's parameters and buffers are broadcast from replica 0 in
  // Create, so replicas start identical whatever their seeds.
  bool broadcast_parameters = true;
  // The pipeline's messages use tags [tag_base, tag_base + 4 *
  // micro_batches + 8); keep them apart from other point-to-point users.
  int32_t tag_base = 1 << 24;
};
// "parameters", "time"
const char* BalanceName(PipelineOptions::Balance balance);
StatusOr<PipelineOptions::Balance> ParseBalance(const std::string& name);

// ---- Plans: what each stage does, in order -------------------------------

enum class PipelineActionKind {
  kForward,
  kBackward,
  kSendActivation,  // to stage s + 1
  kRecvActivation,  // from stage s - 1
  kSendGradient,    // to stage s - 1
  kRecvGradient,    // from stage s + 1
};

struct PipelineAction {
  PipelineActionKind kind;
  int32_t micro_batch;
  bool operator==(const PipelineAction& other) const {
    return kind == other.kind && micro_batch == other.micro_batch;
  }
};
// "Forward(3)", "RecvGradient(0)"
std::string PipelineActionName(const PipelineAction& action);

struct PipelinePlan {
  PipelineSchedule schedule = PipelineSchedule::kGPipe;
  int32_t stages = 0;
  int32_t micro_batches = 0;
  std::vector<std::vector<PipelineAction>> actions;  // actions[stage]
};

// The plan of `schedule` for stages >= 1 and micro_batches >= 1 (fewer
// micro-batches than stages included).
StatusOr<PipelinePlan> BuildPipelinePlan(PipelineSchedule schedule,
                                         int32_t stages, int32_t micro_batches);
// Runs every stage's list together, as described above. kInvalidArgument
// naming the stage, the action and its index when the lists deadlock
// (every blocked stage named), a receive meets another micro-batch's
// message first, a send has no receive, a stage forwards or backwards a
// micro-batch twice, backwards before it forwards, forwards before its
// activation arrived, backwards before its gradient arrived, or leaves a
// micro-batch undone.
Status CheckPipelinePlan(const PipelinePlan& plan);
// Per stage, the most micro-batches forwarded and not yet backwarded at
// once: m for GPipe, min(stages - s, m) for 1F1B.
std::vector<int32_t> PeakActivations(const PipelinePlan& plan);

// Cuts layers with these costs into `stages` contiguous, non-empty runs
// whose largest total cost is smallest; returns the layers per stage.
// kInvalidArgument when there are fewer layers than stages.
StatusOr<std::vector<int64_t>> BalanceStages(
    const std::vector<double>& layer_costs, int32_t stages);

// Header of an activation or gradient message: data type, number of
// dimensions, then up to kPipelineMaxDims sizes.
inline constexpr int32_t kPipelineMaxDims = 8;
inline constexpr int32_t kPipelineHeaderLength = 2 + kPipelineMaxDims;

// ---- The pipeline ----------------------------------------------------------

struct PipelineStatistics {
  int64_t steps = 0;
  // The last TrainStep: the most micro-batches whose activations this stage
  // held at once (counted at each forward and backward), and the seconds it
  // computed (forward, backward, loss) and waited (receives, sends,
  // gradient allreduce), the latter being this stage's bubble.
  int32_t peak_activations = 0;
  double busy_seconds = 0;
  double idle_seconds = 0;
  // Over all steps.
  int32_t max_peak_activations = 0;
  double total_busy_seconds = 0;
  double total_idle_seconds = 0;
  // total idle / (total busy + total idle); 0 before the first step.
  double BubbleFraction() const;
};

// loss_fn(output, target) of one micro-batch: a scalar, the mean over its
// rows.
using PipelineLossFn = std::function<::torch::Tensor(
    const ::torch::Tensor& output, const ::torch::Tensor& target)>;

class Pipeline {
 public:
  // Collective over the world (after kolo::Init): every rank passes the
  // same architecture and options. sample_input, one micro-batch of the
  // input, is needed by Balance::kTime only. kInvalidArgument when the
  // world does not divide into stages, the split does not add up to the
  // Sequential's size, or there are fewer layers than stages.
  static StatusOr<std::unique_ptr<Pipeline>> Create(
      ::torch::nn::Sequential model, const PipelineOptions& options,
      const ::torch::Tensor& sample_input = {});
  ~Pipeline();
  Pipeline(const Pipeline&) = delete;
  Pipeline& operator=(const Pipeline&) = delete;

  // One batch, forward and backward (see the essay above). `input` is read
  // on the first stage and `target` on the last; other ranks may pass
  // undefined tensors. Returns the loss of the global batch on every rank.
  StatusOr<double> TrainStep(const ::torch::Tensor& input,
                             const ::torch::Tensor& target,
                             const PipelineLossFn& loss_fn);
  // Inference, without autograd: the model's output for `input` on the last
  // stage (micro-batched the same way), an undefined tensor elsewhere.
  StatusOr<::torch::Tensor> Forward(const ::torch::Tensor& input);

  int32_t stage() const { return stage_; }
  int32_t stages() const { return options_.stages; }
  int32_t replica() const { return replica_; }
  int32_t replicas() const { return replicas_; }
  bool is_first_stage() const { return stage_ == 0; }
  bool is_last_stage() const { return stage_ == options_.stages - 1; }
  // This stage's layers [first, second) of the original Sequential.
  std::pair<int64_t, int64_t> layers() const { return layers_; }
  // Layers per stage, for every stage.
  const std::vector<int64_t>& split() const { return split_; }
  // This stage's layers (shared with the original Sequential) and their
  // parameters, for its optimizer; named as in the original ("3.weight").
  ::torch::nn::Sequential stage_module() const { return stage_module_; }
  std::vector<::torch::Tensor> parameters() const;
  ::torch::OrderedDict<std::string, ::torch::Tensor> named_parameters() const;
  const PipelinePlan& plan() const { return plan_; }
  const PipelineOptions& options() const { return options_; }
  const PipelineStatistics& statistics() const { return statistics_; }

 private:
  struct Step;
  Pipeline(PipelineOptions options, PipelinePlan plan);
  // Starts a step of `micro_batches` micro-batches: splits `input` on the
  // first stage (`caller` names TrainStep or Forward in its error).
  Status BeginStep(Step& step, const ::torch::Tensor& input,
                   const char* caller);
  Status RunAction(Step& step, const PipelineAction& action);
  // The steps RunAction dispatches to; `where` names the stage and action.
  Status ForwardMicroBatch(Step& step, int32_t mb, const std::string& where);
  Status CheckGradient(Step& step, int32_t mb, const ::torch::Tensor& g,
                       const std::string& where);
  void BackwardMicroBatch(Step& step, int32_t mb);
  // Waits for every send of `step`, even after an error (`status`), so no
  // buffer is freed while the transport may still read it; returns the
  // first error, a failed send named after `context`.
  Status FinishSends(Step& step, Status status, const std::string& context);
  Status SendTensor(Step& step, const ::torch::Tensor& tensor, int32_t peer,
                    int32_t tag);
  StatusOr<::torch::Tensor> RecvTensor(Step& step, int32_t peer, int32_t tag);
  Status AverageGradients(Step& step);
  StatusOr<double> ShareLoss(Step& step, double loss);

  const PipelineOptions options_;
  const PipelinePlan plan_;
  int32_t rank_ = 0;
  int32_t stage_ = 0;
  int32_t replica_ = 0;
  int32_t replicas_ = 1;
  std::pair<int64_t, int64_t> layers_;
  std::vector<int64_t> split_;
  ::torch::nn::Sequential stage_module_;
  // This stage's replicas (null with one replica).
  std::shared_ptr<ProcessGroup> stage_group_;
  PipelineStatistics statistics_;
};

}  // namespace kolo::torch

#endif  // KOLO_TORCH_PIPELINE_H_
