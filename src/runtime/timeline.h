// Timeline: a Chrome-trace (catapult JSON) record of what the runtime did,
// for chrome://tracing and Perfetto. One row per tensor shows its phases
// (NEGOTIATE, WAIT_FOR_OTHERS, COPY_IN, COLLECTIVE, COPY_OUT); a row named
// "cycles" carries an instant mark per negotiation cycle.
//
// The runtime's thread only appends events to a queue; a writer thread
// formats and writes them, so tracing costs the loop a lock and a push.
// The file is valid JSON after every write: each write lands the new events
// together with the closing bracket in one pwrite() at the offset where the
// previous closing bracket began, so a job killed between writes leaves a
// file that parses. (A SIGKILL inside a write that spans a page boundary can
// still cut it; timeline.cc explains why no in-place layout avoids that and
// how rare it is.)
//
// Thread-safety: all methods may be called from any thread.
#ifndef KOLO_RUNTIME_TIMELINE_H_
#define KOLO_RUNTIME_TIMELINE_H_

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "kolo/status.h"

namespace kolo {

class Timeline {
 public:
  using TimePoint = std::chrono::steady_clock::time_point;

  // Starts the writer thread on `path`. Section 0 creates (truncates) the
  // file; section k > 0 appends a new Chrome-trace process (pid k) to the
  // file that sections 0..k-1 wrote, so each kolo::Init of one process
  // adds its own section and none is lost. `rank` labels the process row.
  // Errors name the path (and say so when the file to append to is not a
  // timeline kolo wrote).
  static StatusOr<std::unique_ptr<Timeline>> Open(const std::string& path,
                                                  int32_t rank,
                                                  int32_t section = 0);
  // Flushes what is queued and stops the writer.
  ~Timeline();

  // Opens phase `phase` on the row of `tensor` (rows are created on first
  // use, labelled with the tensor's name). Phases on one row nest like a
  // stack: End closes the innermost open one.
  void Begin(const std::string& tensor, const std::string& phase,
             TimePoint when);
  void End(const std::string& tensor, TimePoint when);
  // A zero-length mark on the "cycles" row.
  void Mark(const std::string& what, TimePoint when);
  // Writes everything queued so far before returning.
  void Flush();

 private:
  class Impl;
  explicit Timeline(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace kolo

#endif  // KOLO_RUNTIME_TIMELINE_H_
