#include "output.h"

#include <errno.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <iterator>
#include <regex>
#include <utility>

namespace kolo {
namespace kolorun {
namespace {

size_t SkipDigits(const std::string& text, size_t pos) {
  while (pos < text.size() &&
         std::isdigit(static_cast<unsigned char>(text[pos]))) {
    ++pos;
  }
  return pos;
}

// Matches "[jobid,rank]<stream>:" at `pos`. On a match sets the rank, the
// stream name and the position just after the colon.
bool MatchMpiTag(const std::string& text, size_t pos, std::string* rank,
                 std::string* stream, size_t* end) {
  if (pos >= text.size() || text[pos] != '[') return false;
  size_t job_end = SkipDigits(text, pos + 1);
  if (job_end == pos + 1 || job_end >= text.size() || text[job_end] != ',') {
    return false;
  }
  size_t rank_end = SkipDigits(text, job_end + 1);
  if (rank_end == job_end + 1 || text.compare(rank_end, 2, "]<") != 0) {
    return false;
  }
  size_t stream_begin = rank_end + 2;
  for (const char* name : {"stdout", "stderr", "stddiag"}) {
    std::string closing = std::string(name) + ">:";
    if (text.compare(stream_begin, closing.size(), closing) == 0) {
      *rank = text.substr(job_end + 1, rank_end - job_end - 1);
      *stream = name;
      *end = stream_begin + closing.size();
      return true;
    }
  }
  return false;
}

}  // namespace

void WriteAll(int fd, const std::string& text) {
  size_t done = 0;
  while (done < text.size()) {
    ssize_t n = write(fd, text.data() + done, text.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      return;
    }
    done += static_cast<size_t>(n);
  }
}

void Say(const std::string& text) {
  WriteAll(STDERR_FILENO, "kolorun: " + text + "\n");
}

LineSplitter::LineSplitter(LineFormat format, std::string prefix, bool in_place)
    : format_(format),
      prefix_(std::move(prefix)),
      in_place_(in_place && format == LineFormat::kPrefix),
      mpi_(prefix_) {}

std::string LineSplitter::Append(const char* data, size_t size) {
  std::string out;
  size_t begin = 0;
  // Adds data[begin, end) to the line; in place, text after a '\r' starts
  // it over.
  auto take = [&](size_t end) {
    if (end == begin) return;
    if (restart_) partial_.clear();
    restart_ = false;
    partial_.append(data + begin, end - begin);
  };
  for (size_t i = 0; i < size; ++i) {
    if (data[i] == '\n') {
      take(i);
      FormatLine(partial_, &out);
      partial_.clear();
      redrawn_ = restart_ = false;
    } else if (data[i] == '\r' && in_place_) {
      take(i);
      redrawn_ = restart_ = true;
    } else {
      continue;
    }
    begin = i + 1;
  }
  take(size);
  while (partial_.size() >= kMaxLineBytes) {
    FormatLine(partial_.substr(0, kMaxLineBytes), &out);
    partial_.erase(0, kMaxLineBytes);
  }
  return out;
}

std::string LineSplitter::Finish() {
  std::string out;
  if (!partial_.empty()) FormatLine(partial_, &out);
  partial_.clear();
  redrawn_ = restart_ = false;
  if (format_ == LineFormat::kMpiTagged) out += mpi_.Finish();
  return out;
}

std::string LineSplitter::Status() const {
  return redrawn_ ? prefix_ + partial_ : std::string();
}

void LineSplitter::FormatLine(const std::string& line, std::string* out) {
  if (format_ == LineFormat::kMpiTagged) {
    out->append(mpi_.Rewrite(line));
    if (std::optional<std::string> said = TranslateMpirunNotice(line))
      out->append("kolorun: " + *said + "\n");
    return;
  }
  out->append(prefix_);
  out->append(line);
  out->push_back('\n');
}

std::optional<std::string> TranslateMpirunNotice(const std::string& line) {
  // Open MPI's words, one line of its boxed notice.
  static const std::regex kNotice(
      "mpirun noticed that process rank ([0-9]+) with PID [0-9]+ on node "
      "(\\S+) exited on signal ([0-9]+)( \\(([^)]*)\\))?\\.?\\s*");
  std::smatch match;
  if (!std::regex_match(line, match, kNotice)) return std::nullopt;
  std::string text = "rank " + match[1].str() + " on " + match[2].str() +
                     " was killed by signal " + match[3].str();
  if (match[5].matched) text += " (" + match[5].str() + ")";
  return text;
}

MpiLineJoiner::MpiLineJoiner(std::string untagged_prefix)
    : untagged_prefix_(std::move(untagged_prefix)) {}

std::string MpiLineJoiner::Rewrite(const std::string& line) {
  std::string out;
  std::string tag;  // kolorun's form of the tag in force; empty before one
  size_t text_begin = 0;
  // The text since the previous tag (or the line's start) ends here:
  // appended to its rank's pending piece, and emitted with it when the
  // printed line ends here too.
  auto piece_ends = [&](size_t text_end, bool line_ends) {
    const std::string text = line.substr(text_begin, text_end - text_begin);
    if (tag.empty()) {
      if (!text.empty() || line_ends) out += untagged_prefix_ + text + "\n";
      return;
    }
    auto pending =
        std::find_if(pending_.begin(), pending_.end(),
                     [&](const auto& entry) { return entry.first == tag; });
    if (!line_ends) {
      if (pending == pending_.end()) {
        pending_.emplace_back(tag, text);
        pending = std::prev(pending_.end());
      } else {
        pending->second += text;
      }
      if (pending->second.size() >= kMaxLineBytes) {
        out += tag + pending->second.substr(0, kMaxLineBytes) + "\n";
        pending->second.erase(0, kMaxLineBytes);
      }
      return;
    }
    out += tag;
    if (pending != pending_.end()) {
      out += pending->second;
      pending_.erase(pending);
    }
    out += text;
    out.push_back('\n');
  };
  for (size_t pos = 0; pos < line.size(); ++pos) {
    std::string rank;
    std::string stream;
    size_t tag_end = 0;
    if (!MatchMpiTag(line, pos, &rank, &stream, &tag_end)) continue;
    piece_ends(pos, false);
    tag = "[" + rank + "]<" + stream + ">: ";
    text_begin = tag_end;
    pos = tag_end - 1;
  }
  piece_ends(line.size(), true);
  return out;
}

std::string MpiLineJoiner::Finish() {
  std::string out;
  for (const auto& [tag, text] : pending_) out += tag + text + "\n";
  pending_.clear();
  return out;
}

}  // namespace kolorun
}  // namespace kolo
