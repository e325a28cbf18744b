// How kolorun relays what its workers print. Each worker's stdout and stderr
// reach kolorun through a pipe in whatever pieces the kernel delivers; kolorun
// writes them out again one whole line at a time, each behind a tag naming
// the rank and the stream:
//
//   [1]<stdout>: epoch 3 loss 0.25
//
// so that lines of different ranks never interleave mid-line. mpirun
// (--backend mpi, started with --tag-output) tags lines itself as
// "[jobid,rank]<stdout>:"; kolorun rewrites those tags into its own form so
// that a job's output reads the same on both backends.
#ifndef KOLO_TOOLS_KOLORUN_OUTPUT_H_
#define KOLO_TOOLS_KOLORUN_OUTPUT_H_

#include <cstddef>
#include <string>

namespace kolo {
namespace kolorun {

// Writes all of `text` to `fd`, retrying short writes. Output that cannot be
// written (the reader of kolorun's stdout went away) is dropped: the job
// keeps running, as it would have without its output being read.
void WriteAll(int fd, const std::string& text);

enum class LineFormat {
  kPrefix,     // put a fixed tag in front of every line
  kMpiTagged,  // rewrite mpirun's "[jobid,rank]<stream>:" tags
};

// Cuts a byte stream into lines and formats them. A line longer than
// kMaxLineBytes is cut there, so that a program that never prints '\n'
// cannot make kolorun hold its whole output.
//
// Thread-safety: none; one per stream, used by kolorun's one loop.
class LineSplitter {
 public:
  static constexpr size_t kMaxLineBytes = size_t{1} << 20;

  // `prefix` ("[0]<stdout>: ") goes in front of every line for kPrefix and
  // in front of untagged lines (mpirun's own messages) for kMpiTagged, where
  // it is normally empty.
  LineSplitter(LineFormat format, std::string prefix);

  // Takes the next bytes of the stream; returns the formatted text of every
  // line they complete, each ending in '\n' (empty when none is complete).
  std::string Append(const char* data, size_t size);
  // At the end of the stream: the formatted unterminated last line, if any.
  std::string Finish();

 private:
  void FormatLine(const std::string& line, std::string* out) const;

  const LineFormat format_;
  const std::string prefix_;
  std::string partial_;  // bytes after the last '\n'
};

// Rewrites one line printed by `mpirun --tag-output`. mpirun glues an
// unterminated line of one rank to the next line it prints, so a line may
// hold several tags; each tag starts a line of its own in the result.
// "[1,0]<stdout>:hi" becomes "[0]<stdout>: hi\n"; a line without a tag is
// `untagged_prefix` + line + "\n".
std::string RewriteMpiLine(const std::string& line,
                           const std::string& untagged_prefix);

}  // namespace kolorun
}  // namespace kolo

#endif  // KOLO_TOOLS_KOLORUN_OUTPUT_H_
