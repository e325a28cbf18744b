// Status and StatusOr: how kolo reports errors across module and thread
// boundaries. A Status is either ok or carries a code a caller can act on and
// a message that names what failed (the rank, the tensor, the flag, the file).
//
// Thread-safety: values; safe to copy between threads.
#ifndef KOLO_STATUS_H_
#define KOLO_STATUS_H_

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <utility>

namespace kolo {

enum class StatusCode : int32_t {
  kOk = 0,
  kInvalidArgument,     // the caller passed something wrong; fix the call
  kFailedPrecondition,  // e.g. a collective before Init()
  kPeerFailure,         // another rank died or disconnected
  kTimeout,             // a bounded wait expired
  kAborted,             // the job is shutting down or an earlier error stuck
  kMismatch,            // ranks called a collective with different arguments
  kUnauthenticated,     // a store client presented the wrong secret
  kNotFound,
  kInternal,
  // an elastic job's workers are about to change (kolo/elastic.h); not an
  // error of the step, a reason to reset
  kMembershipChanged,
};

const char* StatusCodeName(StatusCode code);

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(StatusCode code, std::string message)
      : code_(code), message_(std::move(message)) {}

  static Status Ok() { return Status(); }

  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }
  // "peer failure: rank 1 exited during allreduce #4"
  std::string ToString() const;
  // The same status with `context` and ": " put in front of its message.
  Status WithContext(const std::string& context) const;

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

Status InvalidArgument(std::string message);
Status FailedPrecondition(std::string message);
Status PeerFailure(std::string message);
Status Timeout(std::string message);
Status Aborted(std::string message);
Status Mismatch(std::string message);
Status Unauthenticated(std::string message);
Status NotFound(std::string message);
Status Internal(std::string message);
Status MembershipChanged(std::string message);

// A value or the Status explaining why there is none.
template <typename T>
class [[nodiscard]] StatusOr {
 public:
  StatusOr(Status status) : status_(std::move(status)) {}  // NOLINT: implicit
  StatusOr(T value) : value_(std::move(value)) {}          // NOLINT: implicit

  bool ok() const { return status_.ok(); }
  const Status& status() const { return status_; }
  // Reading the value of an error is a bug: it aborts with the error.
  T& value() & { return Checked(), *value_; }
  const T& value() const& { return Checked(), *value_; }
  T&& value() && { return Checked(), std::move(*value_); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T&& operator*() && { return std::move(*this).value(); }
  // The value, or `fallback` for an error.
  T value_or(T fallback) const& { return ok() ? *value_ : std::move(fallback); }

 private:
  void Checked() const {
    if (!value_) {
      std::fprintf(stderr, "kolo: value of an error StatusOr: %s\n",
                   status_.ToString().c_str());
      std::abort();
    }
  }

  Status status_;
  std::optional<T> value_;
};

}  // namespace kolo

// Returns from the enclosing function when `expr` yields a non-ok Status.
#define KOLO_RETURN_IF_ERROR(expr)               \
  do {                                           \
    ::kolo::Status kolo_status_ = (expr);        \
    if (!kolo_status_.ok()) return kolo_status_; \
  } while (0)

#define KOLO_CONCAT_INNER_(a, b) a##b
#define KOLO_CONCAT_(a, b) KOLO_CONCAT_INNER_(a, b)
#define KOLO_ASSIGN_OR_RETURN_IMPL_(tmp, lhs, expr) \
  auto tmp = (expr);                                \
  if (!tmp.ok()) return tmp.status();               \
  lhs = std::move(tmp).value()
// `KOLO_ASSIGN_OR_RETURN(auto x, MaybeX());`
#define KOLO_ASSIGN_OR_RETURN(lhs, expr) \
  KOLO_ASSIGN_OR_RETURN_IMPL_(KOLO_CONCAT_(kolo_or_, __LINE__), lhs, expr)

#endif  // KOLO_STATUS_H_
