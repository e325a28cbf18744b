// kolo._kolo: the CPython extension under the kolo package. It binds the
// core (world, runtime, groups) and the torch layer (tensor collectives,
// the gradient reducer) and nothing more: the Horovod-shaped API, its
// names, defaults and argument checks, is Python (kolo/torch/), so this
// file stays a list of thin calls.
//
// Every call that waits releases the GIL, and waits in slices so that
// Ctrl-C (a pending Python signal) interrupts it. A kolo::Status that is
// not ok becomes an exception: ValueError for a bad call (invalid argument,
// not initialized, as Horovod raises), MembershipChanged when an elastic
// job's workers change, InternalError (a RuntimeError) for everything the
// job did wrong (a dead or mismatched rank, a timeout); its `code` is the
// StatusCode's number, which kolo.torch.elastic reads to tell a lost peer
// from a bug.
#include <torch/extension.h>

#include <chrono>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "kolo/build_info.h"
#include "kolo/kolo.h"
#include "kolo/point_to_point.h"
#include "kolo/runtime.h"
#include "kolo/status.h"
#include "kolo/torch.h"
#include "python/elastic_bindings.h"
#include "python/status_error.h"

namespace py = pybind11;

namespace kolo::python {
namespace {

// How long one slice of a wait lasts before Python's signals are checked.
constexpr std::chrono::milliseconds kWaitSlice(100);

// Waits for `wait(slice)` to return anything but kTimeout, without the
// GIL, checking for Ctrl-C between slices; `timeout_s` < 0: no limit.
template <typename Wait>
auto WaitInSlices(Wait wait, double timeout_s) {
  const auto start = std::chrono::steady_clock::now();
  for (;;) {
    std::optional<decltype(wait(kWaitSlice))> result;
    {
      py::gil_scoped_release released;
      result.emplace(wait(kWaitSlice));
    }
    if (result->status().code() != StatusCode::kTimeout) return *result;
    if (PyErr_CheckSignals() != 0) throw py::error_already_set();
    const double waited =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
            .count();
    if (timeout_s >= 0 && waited >= timeout_s) return *result;
  }
}

// An enqueued tensor collective as Python holds it.
class PyHandle {
 public:
  explicit PyHandle(torch::TensorHandle handle) : handle_(std::move(handle)) {}
  bool Poll() const { return handle_.Poll(); }
  ::torch::Tensor Wait(double timeout_s) const {
    const torch::TensorHandle& handle = handle_;
    return Value(WaitInSlices(
        [&handle](std::chrono::milliseconds slice) {
          return handle.Wait(slice);
        },
        timeout_s));
  }
  std::vector<int64_t> ReceivedRows() const { return handle_.ReceivedRows(); }
  const std::string& name() const { return handle_.name(); }

 private:
  torch::TensorHandle handle_;
};

ReduceOp ToReduceOp(int op) {
  if (op < 0 || op > static_cast<int>(ReduceOp::kProduct)) {
    throw StatusError(
        InvalidArgument("reduction op " + std::to_string(op) + " is unknown"));
  }
  return static_cast<ReduceOp>(op);
}

py::dict BuildInfoDict() {
  const BuildConfiguration& info = BuildInfo();
  py::dict d;
  d["version"] = info.version;
  d["torch_version"] = info.torch_version;
  d["cuda"] = info.cuda;
  d["cuda_version"] = info.cuda_version;
  d["nccl"] = info.nccl;
  d["nccl_version"] = info.nccl_version;
  d["engines"] = info.engines;
  return d;
}

// A blocking call of the core, without the GIL.
template <typename Call>
auto Released(Call call) {
  py::gil_scoped_release released;
  return call();
}

void BindWorld(py::module_& m) {
  m.def("init", [] { Check(Released([] { return Init(); })); });
  m.def("shutdown", [] { Check(Released([] { return Shutdown(); })); });
  m.def("is_initialized", &IsInitialized);
  m.def("rank", &Rank);
  m.def("size", &Size);
  m.def("local_rank", &LocalRank);
  m.def("local_size", &LocalSize);
  m.def("cross_rank", &CrossRank);
  m.def("cross_size", &CrossSize);
  m.def("backend", [] { return std::string(BackendName(ActiveBackend())); });
  m.def("build_info", &BuildInfoDict);
  m.def("barrier", [] { Check(Released([] { return Barrier(); })); });
  m.def("join", [] { return Value(Released([] { return Join(); })); });
  m.def("start_timeline", [](const std::string& path) {
    Check(Released([&] { return StartTimeline(path); }));
  });
  m.def("stop_timeline",
        [] { Check(Released([] { return StopTimeline(); })); });
}

void BindCollectives(py::module_& m) {
  py::class_<PyHandle>(m, "Handle")
      .def("poll", &PyHandle::Poll)
      .def("wait", &PyHandle::Wait, py::arg("timeout_s") = -1.0)
      .def("received_rows", &PyHandle::ReceivedRows)
      .def_property_readonly("name", &PyHandle::name);
  m.def("allreduce_async", [](const std::string& name,
                              const ::torch::Tensor& tensor,
                              const ::torch::Tensor& output, int op) {
    return PyHandle(
        Value(torch::AllreduceAsync(name, tensor, output, ToReduceOp(op))));
  });
  m.def("grouped_allreduce_async",
        [](const std::string& group, const std::vector<std::string>& names,
           const std::vector<::torch::Tensor>& tensors,
           const std::vector<::torch::Tensor>& outputs, int op) {
          std::vector<PyHandle> handles;
          for (torch::TensorHandle& h : Value(torch::GroupedAllreduceAsync(
                   group, names, tensors, outputs, ToReduceOp(op)))) {
            handles.emplace_back(std::move(h));
          }
          return handles;
        });
  // Horovod's unnamed synchronous calls meet by call order, as kolo.h's
  // synchronous collectives do, which take the runtime's direct path while
  // every rank is idle (runtime/direct_path.h): a few microseconds instead
  // of a hand-off to the runtime's thread and back. Contiguous CPU tensors.
  m.def("allreduce_now", [](const ::torch::Tensor& tensor,
                            const ::torch::Tensor& output, int op) {
    const DataType type = Value(torch::ToDataType(tensor.scalar_type()));
    const ReduceOp reduce = ToReduceOp(op);
    const void* send = tensor.data_ptr();
    void* recv = output.data_ptr();
    const int64_t count = tensor.numel();
    Check(Released([&] { return Allreduce(send, recv, count, type, reduce); }));
  });
  m.def("broadcast_now", [](const ::torch::Tensor& tensor, int32_t root) {
    const DataType type = Value(torch::ToDataType(tensor.scalar_type()));
    void* data = tensor.data_ptr();
    const int64_t count = tensor.numel();
    Check(Released([&] { return Broadcast(data, data, count, type, root); }));
  });
  m.def("allgather_async",
        [](const std::string& name, const ::torch::Tensor& tensor) {
          return PyHandle(Value(torch::AllgatherAsync(name, tensor)));
        });
  m.def("broadcast_async", [](const std::string& name,
                              const ::torch::Tensor& tensor, int32_t root,
                              bool in_place) {
    return PyHandle(Value(in_place
                              ? torch::BroadcastInPlaceAsync(name, tensor, root)
                              : torch::BroadcastAsync(name, tensor, root)));
  });
  m.def("alltoall_async",
        [](const std::string& name, const ::torch::Tensor& tensor,
           std::vector<int64_t> splits) {
          return PyHandle(
              Value(torch::AlltoallAsync(name, tensor, std::move(splits))));
        });
  m.def("reducescatter_async",
        [](const std::string& name, const ::torch::Tensor& tensor, int op) {
          return PyHandle(
              Value(torch::ReducescatterAsync(name, tensor, ToReduceOp(op))));
        });
}

// A process set: the ranks' own group, whose collectives run on the
// caller's thread (kolo/point_to_point.h); null on ranks outside it.
class PyGroup {
 public:
  explicit PyGroup(std::shared_ptr<ProcessGroup> group)
      : group_(std::move(group)) {}
  bool member() const { return group_ != nullptr; }
  int32_t rank() const { return Member().rank(); }
  int32_t size() const { return Member().size(); }
  std::vector<int32_t> ranks() const { return Member().ranks(); }
  // `tensor` must be contiguous and on the CPU (kolo/torch/ checks).
  void Allreduce(const ::torch::Tensor& tensor, int op) {
    const DataType type = Value(torch::ToDataType(tensor.scalar_type()));
    ProcessGroup& group = Member();
    void* data = tensor.data_ptr();
    Check(Released([&] {
      return group.Allreduce(data, data, tensor.numel(), type, ToReduceOp(op));
    }));
  }
  void Broadcast(const ::torch::Tensor& tensor, int32_t root) {
    const DataType type = Value(torch::ToDataType(tensor.scalar_type()));
    ProcessGroup& group = Member();
    void* data = tensor.data_ptr();
    Check(Released(
        [&] { return group.Broadcast(data, tensor.numel(), type, root); }));
  }
  // Every member's `tensor` (same numel everywhere) into `output`, which
  // holds size() times as many elements.
  void Allgather(const ::torch::Tensor& tensor, const ::torch::Tensor& output) {
    const DataType type = Value(torch::ToDataType(tensor.scalar_type()));
    ProcessGroup& group = Member();
    Check(Released([&] {
      return group.Allgather(tensor.data_ptr(), output.data_ptr(),
                             tensor.numel(), type);
    }));
  }
  void Barrier() {
    ProcessGroup& group = Member();
    Check(Released([&] { return group.Barrier(); }));
  }

 private:
  ProcessGroup& Member() const {
    if (group_ == nullptr) {
      throw StatusError(
          FailedPrecondition("this rank (" + std::to_string(Rank()) +
                             ") is not a member of the process set"));
    }
    return *group_;
  }
  std::shared_ptr<ProcessGroup> group_;
};

void BindGroups(py::module_& m) {
  py::class_<PyGroup>(m, "Group")
      .def_property_readonly("member", &PyGroup::member)
      .def_property_readonly("rank", &PyGroup::rank)
      .def_property_readonly("size", &PyGroup::size)
      .def_property_readonly("ranks", &PyGroup::ranks)
      .def("allreduce", &PyGroup::Allreduce)
      .def("broadcast", &PyGroup::Broadcast)
      .def("allgather", &PyGroup::Allgather)
      .def("barrier", &PyGroup::Barrier);
  m.def("new_group", [](const std::vector<int32_t>& ranks) {
    return PyGroup(Value(Released([&] { return NewGroup(ranks); })));
  });
}

void BindReducer(py::module_& m) {
  py::class_<torch::GradientReducer>(m, "GradientReducer")
      .def(
          py::init(
              [](const std::vector<std::pair<std::string, ::torch::Tensor>>&
                     named,
                 int op, const std::string& compression,
                 int32_t backward_passes_per_step, bool average_backward_passes,
                 double gradient_predivide_factor, int64_t bucket_bytes,
                 std::vector<std::vector<std::string>> groups) {
                ::torch::OrderedDict<std::string, ::torch::Tensor> parameters;
                for (const auto& [name, tensor] : named) {
                  if (parameters.contains(name)) {
                    throw StatusError(InvalidArgument(
                        "parameter name '" + name + "' appears twice"));
                  }
                  parameters.insert(name, tensor);
                }
                torch::DistributedOptimizerOptions options;
                options.op = ToReduceOp(op);
                options.compression =
                    compression == "fp16"   ? torch::Compression::kFloat16
                    : compression == "bf16" ? torch::Compression::kBFloat16
                                            : torch::Compression::kNone;
                options.backward_passes_per_step = backward_passes_per_step;
                options.average_backward_passes = average_backward_passes;
                options.gradient_predivide_factor = gradient_predivide_factor;
                options.bucket_bytes = bucket_bytes;
                options.groups = std::move(groups);
                return std::make_unique<torch::GradientReducer>(parameters,
                                                                options);
              }),
          py::arg("named_parameters"), py::arg("op"), py::arg("compression"),
          py::arg("backward_passes_per_step"),
          py::arg("average_backward_passes"),
          py::arg("gradient_predivide_factor"), py::arg("bucket_bytes"),
          py::arg("groups"))
      .def("synchronize",
           [](torch::GradientReducer& reducer) {
             Check(Released([&] { return reducer.Synchronize(); }));
           })
      .def_property_readonly("wait_seconds",
                             &torch::GradientReducer::wait_seconds)
      .def_property_readonly("bucket_bytes",
                             &torch::GradientReducer::bucket_bytes);
}

}  // namespace
}  // namespace kolo::python

PYBIND11_MODULE(_kolo, m) {
  using kolo::python::StatusError;
  m.doc() = "kolo's core and torch layer; use kolo.torch.";
  static py::exception<StatusError> internal_error(m, "InternalError",
                                                   PyExc_RuntimeError);
  static py::exception<StatusError> membership_changed(m, "MembershipChanged",
                                                       PyExc_RuntimeError);
  py::register_exception_translator([](std::exception_ptr thrown) {
    try {
      if (thrown) std::rethrow_exception(thrown);
    } catch (const StatusError& e) {
      switch (e.code()) {
        case kolo::StatusCode::kInvalidArgument:
        case kolo::StatusCode::kFailedPrecondition:
          PyErr_SetString(PyExc_ValueError, e.what());
          return;
        case kolo::StatusCode::kMembershipChanged:
          PyErr_SetString(membership_changed.ptr(), e.what());
          return;
        default: {
          py::object error = py::handle(internal_error.ptr())(e.what());
          error.attr("code") = static_cast<int>(e.code());
          PyErr_SetObject(internal_error.ptr(), error.ptr());
        }
      }
    }
  });
  kolo::python::BindWorld(m);
  kolo::python::BindCollectives(m);
  kolo::python::BindGroups(m);
  kolo::python::BindReducer(m);
  kolo::python::BindElastic(m);
}
