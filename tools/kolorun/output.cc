#include "output.h"

#include <errno.h>
#include <unistd.h>

#include <cctype>
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

LineSplitter::LineSplitter(LineFormat format, std::string prefix)
    : format_(format), prefix_(std::move(prefix)) {}

std::string LineSplitter::Append(const char* data, size_t size) {
  std::string out;
  size_t begin = 0;
  for (size_t i = 0; i < size; ++i) {
    if (data[i] != '\n') continue;
    partial_.append(data + begin, i - begin);
    FormatLine(partial_, &out);
    partial_.clear();
    begin = i + 1;
  }
  partial_.append(data + begin, size - begin);
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
  return out;
}

void LineSplitter::FormatLine(const std::string& line, std::string* out) const {
  if (format_ == LineFormat::kMpiTagged) {
    out->append(RewriteMpiLine(line, prefix_));
    return;
  }
  out->append(prefix_);
  out->append(line);
  out->push_back('\n');
}

std::string RewriteMpiLine(const std::string& line,
                           const std::string& untagged_prefix) {
  std::string out;
  std::string rank;
  std::string stream;
  size_t text_begin = 0;
  bool tagged = false;
  // Emits the text since the previous tag (or the line's start) as one line.
  auto emit = [&](size_t text_end) {
    if (tagged) {
      out += "[" + rank + "]<" + stream + ">: ";
    } else if (text_end == text_begin) {
      return;  // nothing before the first tag
    } else {
      out += untagged_prefix;
    }
    out.append(line, text_begin, text_end - text_begin);
    out.push_back('\n');
  };
  for (size_t pos = 0; pos < line.size(); ++pos) {
    std::string next_rank;
    std::string next_stream;
    size_t tag_end = 0;
    if (!MatchMpiTag(line, pos, &next_rank, &next_stream, &tag_end)) continue;
    emit(pos);
    rank = std::move(next_rank);
    stream = std::move(next_stream);
    tagged = true;
    text_begin = tag_end;
    pos = tag_end - 1;
  }
  if (!tagged) return untagged_prefix + line + "\n";
  emit(line.size());
  return out;
}

}  // namespace kolorun
}  // namespace kolo
