// How a kolo::Status leaves the extension: as a StatusError, which
// PYBIND11_MODULE (_kolo.cc) translates into a Python exception in one
// place, keeping its code for whoever must tell a lost peer from a bug
// (elastic_bindings.cc).
#ifndef KOLO_PYTHON_STATUS_ERROR_H_
#define KOLO_PYTHON_STATUS_ERROR_H_

#include <stdexcept>
#include <utility>

#include "kolo/status.h"

namespace kolo::python {

class StatusError : public std::runtime_error {
 public:
  explicit StatusError(const Status& status)
      : std::runtime_error(status.ToString()), code_(status.code()) {}
  StatusCode code() const { return code_; }

 private:
  StatusCode code_;
};

inline void Check(const Status& status) {
  if (!status.ok()) throw StatusError(status);
}

template <typename T>
T Value(StatusOr<T> result) {
  Check(result.status());
  return std::move(*result);
}

}  // namespace kolo::python

#endif  // KOLO_PYTHON_STATUS_ERROR_H_
