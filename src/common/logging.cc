#include "common/logging.h"

#include "common/config.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "common/mutex.h"

namespace kolo {
namespace {

struct LogState {
  Mutex mutex;
  std::string prefix KOLO_GUARDED_BY(mutex);
  LogLevel min_level KOLO_GUARDED_BY(mutex) = InitialLevel();

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
  LogState& state = State();
  MutexLock lock(&state.mutex);
  state.prefix = prefix;
}

void SetMinLogLevel(LogLevel level) {
  LogState& state = State();
  MutexLock lock(&state.mutex);
  state.min_level = level;
}

bool ShouldLog(LogLevel level) {
  LogState& state = State();
  MutexLock lock(&state.mutex);
  return level >= state.min_level;
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
    LogState& state = State();
    MutexLock lock(&state.mutex);
    line = "kolo";
    if (!state.prefix.empty()) line += " " + state.prefix;
  }
  line += " " + std::string(LevelName(level_)) + ": " + stream_.str() + "\n";
  std::fwrite(line.data(), 1, line.size(), stderr);
  std::fflush(stderr);
  if (fatal_) std::abort();
}

}  // namespace kolo
