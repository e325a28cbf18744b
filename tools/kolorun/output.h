// How kolorun relays what its workers print. Each worker's stdout and stderr
// reach kolorun through a pipe in whatever pieces the kernel delivers; kolorun
// writes them out again one whole line at a time, each behind a tag naming
// the rank and the stream:
//
//   [1]<stdout>: epoch 3 loss 0.25
//
// so that lines of different ranks never interleave mid-line.
//
// The exception is a line redrawn in place. A rank whose stdout is a
// terminal (kolorun gives rank 0 one when its own stdout is a terminal; see
// launcher.h) may draw a progress line with '\r': "\repoch 1 step 3\x1b[K",
// "\repoch 1 step 4\x1b[K", ... and end it with '\n'. Waiting for that '\n'
// would show nothing until the epoch ends, so such a stream's splitter is
// in place: once its line holds a '\r', the text after the last '\r' is
// the line shown now (Status()), relayed at once behind the rank's tag, and
// kolorun redraws it as it changes.
//
// mpirun
// (--backend mpi, started with --tag-output) tags lines itself as
// "[jobid,rank]<stdout>:"; kolorun rewrites those tags into its own form and
// joins the pieces mpirun tagged apart, so that a job's output reads the
// same on both backends.
#ifndef KOLO_TOOLS_KOLORUN_OUTPUT_H_
#define KOLO_TOOLS_KOLORUN_OUTPUT_H_

#include <cstddef>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace kolo {
namespace kolorun {

// Writes all of `text` to `fd`, retrying short writes. Output that cannot be
// written (the reader of kolorun's stdout went away) is dropped: the job
// keeps running, as it would have without its output being read.
void WriteAll(int fd, const std::string& text);

// kolorun's own message: "kolorun: <text>\n" on stderr. While a job runs,
// ChildWatcher::Message() says it instead, above any line drawn in place.
void Say(const std::string& text);

// The longest line kolorun holds back waiting for its '\n': a longer one is
// cut there, so that a program that never prints '\n' cannot make kolorun
// hold its whole output.
inline constexpr size_t kMaxLineBytes = size_t{1} << 20;

// mpirun's notice that a rank died, "mpirun noticed that process rank 1
// with PID 4242 on node vm exited on signal 9 (Killed).", in kolorun's words:
// "rank 1 on vm was killed by signal 9 (Killed)"; nullopt for other lines.
// kolorun adds it after mpirun's box, so that a job's failure reads the
// same on every launcher.
std::optional<std::string> TranslateMpirunNotice(const std::string& line);

enum class LineFormat {
  kPrefix,     // put a fixed tag in front of every line
  kMpiTagged,  // rewrite mpirun's "[jobid,rank]<stream>:" tags
};

// Rewrites the lines `mpirun --tag-output` prints. mpirun tags each piece
// of a rank's output as it reads it, so a rank's line that reached mpirun in
// two pieces appears as two tagged pieces, and another rank's piece may sit
// between them on the same printed line:
//
//   [1,0]<stdout>:abc[1,1]<stdout>:xy[1,0]<stdout>:def
//
// A piece that another tag follows is unterminated; the joiner keeps it
// until the rest of that rank's line arrives (or it reaches kMaxLineBytes,
// where it is cut), so the above yields "[0]<stdout>: abcdef" and keeps
// rank 1's "xy" for later. Text before the
// first tag (mpirun's own messages) is a line of its own behind
// `untagged_prefix`.
//
// Thread-safety: none; one per stream.
class MpiLineJoiner {
 public:
  explicit MpiLineJoiner(std::string untagged_prefix);

  // Takes one printed line (without its '\n'); returns the lines it
  // completes, each ending in '\n'.
  std::string Rewrite(const std::string& line);
  // At the end of the stream: every rank's unterminated piece, as a line.
  std::string Finish();

 private:
  const std::string untagged_prefix_;
  // Unterminated text by tag ("[0]<stdout>: "), in the order first seen.
  std::vector<std::pair<std::string, std::string>> pending_;
};

// Cuts a byte stream into lines and formats them. A line longer than
// kMaxLineBytes is cut there. In place (kPrefix only), '\r' starts the
// line over: a line that ends with '\n' is the text after its last '\r'
// ("a\rb\n" is the line "b"; "a\r\n" is "a"), and until it ends, Status()
// is that text.
//
// Thread-safety: none; one per stream, used by kolorun's one loop.
class LineSplitter {
 public:
  static constexpr size_t kMaxLineBytes = kolorun::kMaxLineBytes;

  // `prefix` ("[0]<stdout>: ") goes in front of every line for kPrefix and
  // in front of untagged lines (mpirun's own messages) for kMpiTagged, where
  // it is normally empty.
  LineSplitter(LineFormat format, std::string prefix, bool in_place = false);

  // Takes the next bytes of the stream; returns the formatted text of every
  // line they complete, each ending in '\n' (empty when none is complete).
  std::string Append(const char* data, size_t size);
  // At the end of the stream: the formatted unterminated last line, if any.
  std::string Finish();
  // In place: the unfinished line being redrawn, behind the prefix and
  // without '\n' ("[0]<stdout>: epoch 1 step 4"); empty when the line
  // has no '\r' yet.
  std::string Status() const;

 private:
  void FormatLine(const std::string& line, std::string* out);

  const LineFormat format_;
  const std::string prefix_;
  const bool in_place_;
  std::string partial_;  // bytes after the last '\n' (in place: or '\r')
  // In place: the line holds a '\r', and whether the next byte of text
  // starts it over.
  bool redrawn_ = false;
  bool restart_ = false;
  MpiLineJoiner mpi_;  // kMpiTagged only
};

}  // namespace kolorun
}  // namespace kolo

#endif  // KOLO_TOOLS_KOLORUN_OUTPUT_H_
