#include "progress_line.h"

#include <fmt/format.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <utility>

namespace kolo::bench {
namespace {

// "\x1b[K": erase from the cursor to the end of the line.
constexpr const char* kEraseToEnd = "\x1b[K";

// The width of the terminal behind `out`; 0 when it does not say.
int TerminalColumns(std::FILE* out) {
  winsize size{};
  if (ioctl(fileno(out), TIOCGWINSZ, &size) != 0) return 0;
  return size.ws_col;
}

}  // namespace

bool DrawsInPlace(std::FILE* out) {
  if (!isatty(fileno(out))) return false;
  const char* term = std::getenv("TERM");
  return term == nullptr || std::strcmp(term, "dumb") != 0;
}

std::string FormatDuration(double seconds) {
  const int64_t s = static_cast<int64_t>(seconds + 0.5);
  if (s >= 3600)
    return fmt::format("{}:{:02}:{:02}", s / 3600, s / 60 % 60, s % 60);
  return fmt::format("{}:{:02}", s / 60, s % 60);
}

std::string RunsProgressText(int64_t run, int64_t total,
                             const std::string& label, double elapsed_seconds) {
  std::string text = fmt::format("run {}/{}: {}  elapsed {}", run, total, label,
                                 FormatDuration(elapsed_seconds));
  const int64_t finished = run - 1;
  if (finished > 0) {
    text += "  ETA " +
            FormatDuration(elapsed_seconds / static_cast<double>(finished) *
                           static_cast<double>(total - finished));
  }
  return text;
}

ProgressLine::ProgressLine(std::FILE* out)
    : ProgressLine(out, Options{DrawsInPlace(out)}) {}

ProgressLine::ProgressLine(std::FILE* out, Options options)
    : out_(out), options_(std::move(options)) {}

ProgressLine::~ProgressLine() {
  if (!text_.empty()) Write("\n");
}

void ProgressLine::Update(const std::string& text, bool force) {
  if (!options_.in_place) return;
  const Clock::time_point now = options_.now();
  if (!force && drawn_once_ && now - last_draw_ < options_.min_interval) {
    return;
  }
  drawn_once_ = true;
  last_draw_ = now;
  text_ = text;
  Write(Drawing());
}

void ProgressLine::Print(const std::string& line) {
  if (!options_.in_place || text_.empty()) {
    Write(line + "\n");
    return;
  }
  // The line overwrites the progress line; one write, so the terminal never
  // shows it without the progress line below.
  Write(Overwrite(line) + "\n" + Drawing());
}

void ProgressLine::Finish(const std::string& line) {
  std::string bytes;
  if (options_.in_place && !text_.empty())
    bytes = Overwrite(line);
  else
    bytes = line;
  if (!line.empty()) bytes += "\n";
  Write(bytes);
  text_.clear();
  // The next epoch's first Update draws at once.
  drawn_once_ = false;
}

std::string ProgressLine::Overwrite(const std::string& line) {
  return "\r" + line + kEraseToEnd;
}

std::string ProgressLine::Drawing() const {
  std::string shown = text_;
  const int columns =
      options_.columns > 0 ? options_.columns : TerminalColumns(out_);
  // One column short: a line that fills the last column leaves the cursor
  // past it, where some terminals wrap.
  if (columns > 1 && shown.size() >= static_cast<size_t>(columns))
    shown.resize(static_cast<size_t>(columns - 1));
  return "\r" + shown + kEraseToEnd;
}

void ProgressLine::Write(const std::string& bytes) {
  std::fwrite(bytes.data(), 1, bytes.size(), out_);
  std::fflush(out_);
}

RunsProgress::RunsProgress(int64_t total, std::FILE* out)
    : line_(out), total_(total) {}

void RunsProgress::Start(const std::string& label) {
  const double elapsed =
      std::chrono::duration<double>(ProgressLine::Clock::now() - start_)
          .count();
  line_.Update(RunsProgressText(++started_, total_, label, elapsed),
               /*force=*/true);
}

}  // namespace kolo::bench
