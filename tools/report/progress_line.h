// ProgressLine: the one line of progress a tool redraws in place while it
// works, as tqdm does, for kolo-train's epochs and kolo-bench's runs.
//
// On a terminal, Update() draws "\r" + text + "\x1b[K": the carriage return
// goes back to the line's start and the erase-to-end-of-line removes what a
// longer previous text left behind. Redraws are throttled to one per
// min_interval, since a terminal (or kolorun relaying it) gains nothing from
// a hundred redraws a second. The text is cut to the terminal's width: a
// line that wraps can no longer be redrawn with '\r'.
//
// An ordinary line printed while the progress line is drawn would land at
// its end, so lines go through Print(), which erases the progress line,
// prints the line and draws the progress line again below it. Finish()
// erases it for good, leaving the line it is given (an epoch's summary) in
// its place.
//
// Elsewhere (a file, a pipe, TERM=dumb) Update() prints nothing, because a
// log wants the summaries only; Print() and Finish() print plain lines.
//
// Thread-safety: none; one owner, which prints to `out` through it alone
// while a line is drawn.
#ifndef KOLO_TOOLS_REPORT_PROGRESS_LINE_H_
#define KOLO_TOOLS_REPORT_PROGRESS_LINE_H_

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <string>

namespace kolo::bench {

// Whether `out` is a terminal that can redraw a line in place: a tty whose
// TERM is not "dumb".
bool DrawsInPlace(std::FILE* out);

// "0:42", "12:05", "1:02:03": an elapsed time or an ETA.
std::string FormatDuration(double seconds);

// The progress of a loop of `total` runs as run `run` (from 1) starts,
// `elapsed_seconds` after the first did: "run 3/12: lenet kolo np 2  elapsed
// 1:23  ETA 4:09". The ETA assumes the runs left take as long as the
// finished ones did on average; the first run has none.
std::string RunsProgressText(int64_t run, int64_t total,
                             const std::string& label, double elapsed_seconds);

class ProgressLine {
 public:
  using Clock = std::chrono::steady_clock;

  struct Options {
    bool in_place = false;
    // The terminal's width; 0: ask the terminal at each redraw (it may be
    // resized), and do not cut when it does not say.
    int columns = 0;
    std::chrono::milliseconds min_interval{100};
    std::function<Clock::time_point()> now = [] { return Clock::now(); };
  };

  // In place when `out` draws in place (DrawsInPlace).
  explicit ProgressLine(std::FILE* out = stdout);
  ProgressLine(std::FILE* out, Options options);
  // A line still drawn ends with a newline, so that an error printed after
  // it starts on a line of its own and the last progress stays readable.
  ~ProgressLine();
  ProgressLine(const ProgressLine&) = delete;
  ProgressLine& operator=(const ProgressLine&) = delete;

  bool in_place() const { return options_.in_place; }

  // Redraws the line with `text` (a single line), unless the last redraw
  // was less than min_interval ago; `force` redraws anyway.
  void Update(const std::string& text, bool force = false);
  // Prints `line` (without its '\n') as an ordinary line above the
  // progress line.
  void Print(const std::string& line);
  // Erases the progress line and prints `line` in its place, unless it is
  // empty; the next Update() starts a new progress line.
  void Finish(const std::string& line);

 private:
  // The bytes that draw text_ over the line the cursor is on.
  std::string Drawing() const;
  // The bytes that put `line` in place of the line the cursor is on.
  static std::string Overwrite(const std::string& line);
  void Write(const std::string& bytes);

  std::FILE* const out_;
  const Options options_;
  std::string text_;  // the text drawn now; empty when none is
  Clock::time_point last_draw_{};
  bool drawn_once_ = false;
};

// A loop of `total` runs (kolo-bench's configurations times repeats) on a
// ProgressLine: Start() draws RunsProgressText as each run begins.
//
// Thread-safety: none; one owner.
class RunsProgress {
 public:
  explicit RunsProgress(int64_t total, std::FILE* out = stdout);

  // The next run, named `label`, begins.
  void Start(const std::string& label);
  // A line about a finished run, above the progress line.
  void Print(const std::string& line) { line_.Print(line); }
  // Every run is done: erases the progress line.
  void Finish() { line_.Finish(""); }

 private:
  ProgressLine line_;
  const int64_t total_;
  int64_t started_ = 0;
  const ProgressLine::Clock::time_point start_ = ProgressLine::Clock::now();
};

}  // namespace kolo::bench

#endif  // KOLO_TOOLS_REPORT_PROGRESS_LINE_H_
