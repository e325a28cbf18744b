#include "common/logging.h"

#include "common/config.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>

namespace kolo {
namespace {

struct LogState {
  std::mutex mutex;
  std::string prefix;  // guarded by mutex
  LogLevel min_level = InitialLevel();

  // A bad KOLO_LOG_LEVEL logs at info until Init reports it as an error.
  static LogLevel InitialLevel() {
    return ReadLogLevel(ProcessEnvironment()).value_or(LogLevel::kInfo);
  }
};

LogState& State() {
  static LogState* state = new LogState();  // never destroyed: used at exit
  return *state;
}

const char* LevelName(LogLevel level) {
  switch (level) {
    case LogLevel::kDebug: return "debug";
    case LogLevel::kInfo: return "info";
    case LogLevel::kWarning: return "warning";
    case LogLevel::kError: return "error";
  }
  return "?";
}

}  // namespace

void SetLogPrefix(const std::string& prefix) {
  std::lock_guard<std::mutex> lock(State().mutex);
  State().prefix = prefix;
}

void SetMinLogLevel(LogLevel level) {
  std::lock_guard<std::mutex> lock(State().mutex);
  State().min_level = level;
}

bool ShouldLog(LogLevel level) {
  std::lock_guard<std::mutex> lock(State().mutex);
  return level >= State().min_level;
}

LogMessage::LogMessage(LogLevel level, const char* file, int line, bool fatal)
    : level_(level), fatal_(fatal) {
  if (fatal_ || level_ == LogLevel::kDebug) {
    const char* base = std::strrchr(file, '/');
    stream_ << (base ? base + 1 : file) << ":" << line << ": ";
  }
}

LogMessage::~LogMessage() {
  std::string line;
  {
    std::lock_guard<std::mutex> lock(State().mutex);
    line = "kolo";
    if (!State().prefix.empty()) line += " " + State().prefix;
  }
  line += " " + std::string(LevelName(level_)) + ": " + stream_.str() + "\n";
  std::fwrite(line.data(), 1, line.size(), stderr);
  std::fflush(stderr);
  if (fatal_) std::abort();
}

}  // namespace kolo
