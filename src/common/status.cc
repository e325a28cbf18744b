#include "kolo/status.h"

namespace kolo {

const char* StatusCodeName(StatusCode code) {
  switch (code) {
    case StatusCode::kOk: return "ok";
    case StatusCode::kInvalidArgument: return "invalid argument";
    case StatusCode::kFailedPrecondition: return "failed precondition";
    case StatusCode::kPeerFailure: return "peer failure";
    case StatusCode::kTimeout: return "timeout";
    case StatusCode::kAborted: return "aborted";
    case StatusCode::kMismatch: return "mismatch";
    case StatusCode::kUnauthenticated: return "unauthenticated";
    case StatusCode::kNotFound: return "not found";
    case StatusCode::kInternal: return "internal";
    case StatusCode::kMembershipChanged: return "membership changed";
  }
  return "unknown";
}

std::string Status::ToString() const {
  if (ok()) return "ok";
  return std::string(StatusCodeName(code_)) + ": " + message_;
}

Status Status::WithContext(const std::string& context) const {
  if (ok()) return *this;
  return Status(code_, context + ": " + message_);
}

Status InvalidArgument(std::string m) {
  return {StatusCode::kInvalidArgument, std::move(m)};
}
Status FailedPrecondition(std::string m) {
  return {StatusCode::kFailedPrecondition, std::move(m)};
}
Status PeerFailure(std::string m) {
  return {StatusCode::kPeerFailure, std::move(m)};
}
Status Timeout(std::string m) { return {StatusCode::kTimeout, std::move(m)}; }
Status Aborted(std::string m) { return {StatusCode::kAborted, std::move(m)}; }
Status Mismatch(std::string m) { return {StatusCode::kMismatch, std::move(m)}; }
Status Unauthenticated(std::string m) {
  return {StatusCode::kUnauthenticated, std::move(m)};
}
Status NotFound(std::string m) { return {StatusCode::kNotFound, std::move(m)}; }
Status Internal(std::string m) { return {StatusCode::kInternal, std::move(m)}; }
Status MembershipChanged(std::string m) {
  return {StatusCode::kMembershipChanged, std::move(m)};
}

}  // namespace kolo
