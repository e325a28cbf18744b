// kolo._kolo's elastic part: kolo::elastic::State whose fields are saved
// and loaded by Python callables, and kolo::elastic::Run calling a Python
// training function. kolo.torch.elastic builds Horovod's API on it.
//
// The core waits (for a round, in a collective) without the GIL and takes
// it back for every Python call it makes: a field's save or load, a reset
// callback, the training function. A Python exception raised in one of
// them becomes a Status the core acts on:
//  - MembershipChanged (Horovod's HostsUpdatedInterrupt): re-join without
//    restoring;
//  - InternalError (HorovodInternalError) with the code of the kolo error
//    it came from, or, raised by Python code itself, as a lost peer: the
//    core restores the last commit and re-joins when the world broke;
//  - anything else ends Run, and the same exception leaves it.
#include "python/elastic_bindings.h"

#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "kolo/elastic.h"
#include "kolo/status.h"
#include "python/status_error.h"

namespace py = pybind11;

namespace kolo::python {
namespace {

class PyElasticState {
 public:
  PyElasticState(py::object internal_error, py::object membership_changed)
      : internal_error_(std::move(internal_error)),
        membership_changed_(std::move(membership_changed)) {}

  // `save()` returns bytes; `load(bytes)` puts them back.
  void Track(const std::string& name, py::function save, py::function load) {
    elastic::Field field;
    field.name = name;
    field.save = [this, save = Shared(save)]() -> StatusOr<std::string> {
      py::gil_scoped_acquire acquired;
      try {
        return std::string((*save)().cast<py::bytes>());
      } catch (py::error_already_set& e) {
        return FromPython(e);
      } catch (const py::cast_error& e) {
        return InvalidArgument(std::string("its save() must return bytes: ") +
                               e.what());
      }
    };
    field.load = [this, load = Shared(load)](const std::string& bytes) {
      py::gil_scoped_acquire acquired;
      try {
        (*load)(py::bytes(bytes));
        return Status::Ok();
      } catch (py::error_already_set& e) {
        return FromPython(e);
      }
    };
    state_.Track(std::move(field));
  }

  void OnReset(py::function callback) {
    state_.OnReset(
        [this, callback = Shared(callback)] { return Invoke(*callback); });
  }

  void Commit() {
    Call([this] { return state_.Commit(); });
  }
  void CheckMembership() {
    Call([this] { return state_.CheckMembership(); });
  }
  void Save() {
    Call([this] { return state_.Save(); });
  }
  void Restore() {
    Call([this] { return state_.Restore(); });
  }
  void Sync() {
    Call([this] { return state_.Sync(); });
  }
  int64_t commits() const { return state_.commits(); }
  int32_t resets() const { return state_.resets(); }

  // Calls `train()` in rounds of the elastic job until it returns.
  void Run(py::function train) {
    Call([this, train = Shared(train)] {
      return elastic::Run(state_, [this, &train] { return Invoke(*train); });
    });
  }

 private:
  // A Python object a C++ callback holds: std::function copies what it
  // holds, and a py::object may be copied only with the GIL, so the copies
  // share one.
  static std::shared_ptr<py::function> Shared(py::function f) {
    return std::shared_ptr<py::function>(new py::function(std::move(f)),
                                         [](py::function* held) {
                                           py::gil_scoped_acquire acquired;
                                           delete held;
                                         });
  }

  // Calls `f()` with the GIL, for the core.
  Status Invoke(const py::function& f) {
    py::gil_scoped_acquire acquired;
    try {
      f();
      return Status::Ok();
    } catch (py::error_already_set& e) {
      return FromPython(e);
    }
  }

  // With the GIL. What the core should do about a Python exception (see
  // the top of the file); one it cannot act on is kept for Call to raise.
  Status FromPython(py::error_already_set& e) {
    // The exception's own message: e.what() adds the Python traceback,
    // which the core would log at every reset.
    const std::string message = py::str(e.value()).cast<std::string>();
    if (e.matches(membership_changed_)) return MembershipChanged(message);
    if (e.matches(internal_error_)) {
      py::object code = py::getattr(e.value(), "code", py::none());
      if (code.is_none()) return Aborted("HorovodInternalError: " + message);
      // Back to the Status it was made from (StatusError's message is
      // Status::ToString(), which starts with the code's name).
      const auto status_code = static_cast<StatusCode>(code.cast<int>());
      const std::string prefix =
          std::string(StatusCodeName(status_code)) + ": ";
      return Status(status_code, message.rfind(prefix, 0) == 0
                                     ? message.substr(prefix.size())
                                     : message);
    }
    const std::string what =
        py::str(e.type().attr("__name__")).cast<std::string>() + ": " + message;
    if (!raised_) raised_.emplace(std::move(e));
    return Internal("a Python exception: " + what);
  }

  // Runs a call of the core without the GIL, then raises the Python
  // exception that ended it, if one did, else its status.
  template <typename CoreCall>
  void Call(CoreCall call) {
    Status status;
    {
      py::gil_scoped_release released;
      status = call();
    }
    if (raised_) {
      py::error_already_set e = std::move(*raised_);
      raised_.reset();
      throw e;
    }
    Check(status);
  }

  elastic::State state_;
  py::object internal_error_;
  py::object membership_changed_;
  std::optional<py::error_already_set> raised_;
};

}  // namespace

void BindElastic(py::module_& m) {
  py::class_<PyElasticState>(m, "ElasticState")
      .def(py::init([m]() {
        return std::make_unique<PyElasticState>(m.attr("InternalError"),
                                                m.attr("MembershipChanged"));
      }))
      .def("track", &PyElasticState::Track, py::arg("name"), py::arg("save"),
           py::arg("load"))
      .def("on_reset", &PyElasticState::OnReset)
      .def("commit", &PyElasticState::Commit)
      .def("check_membership", &PyElasticState::CheckMembership)
      .def("save", &PyElasticState::Save)
      .def("restore", &PyElasticState::Restore)
      .def("sync", &PyElasticState::Sync)
      .def("run", &PyElasticState::Run)
      .def_property_readonly("commits", &PyElasticState::commits)
      .def_property_readonly("resets", &PyElasticState::resets);
  m.def("is_elastic_worker", &elastic::IsElasticWorker);
}

}  // namespace kolo::python
