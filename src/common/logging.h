// Minimal logging and invariant checks.
//
// KOLO_LOG(WARNING) << "text"; writes one line to stderr, prefixed with
// "kolo" and the level. KOLO_CHECK(cond) and KOLO_CHECK_EQ(a, b) are for
// bugs in kolo itself, never for user input: they print the condition, both
// values, file and line, then abort.
#ifndef KOLO_COMMON_LOGGING_H_
#define KOLO_COMMON_LOGGING_H_

#include <sstream>
#include <string>

#include "kolo/options.h"

namespace kolo {

// Sets the prefix every line carries (e.g. "rank 3"); thread-safe.
void SetLogPrefix(const std::string& prefix);
// Lines below this level are dropped; from KOLO_LOG_LEVEL by default, then
// from each Init's options.
void SetMinLogLevel(LogLevel level);
bool ShouldLog(LogLevel level);

class LogMessage {
 public:
  LogMessage(LogLevel level, const char* file, int line, bool fatal = false);
  ~LogMessage();
  std::ostream& stream() { return stream_; }

 private:
  LogLevel level_;
  bool fatal_;
  std::ostringstream stream_;
};

}  // namespace kolo

#define KOLO_LOG_LEVEL_DEBUG ::kolo::LogLevel::kDebug
#define KOLO_LOG_LEVEL_INFO ::kolo::LogLevel::kInfo
#define KOLO_LOG_LEVEL_WARNING ::kolo::LogLevel::kWarning
#define KOLO_LOG_LEVEL_ERROR ::kolo::LogLevel::kError

#define KOLO_LOG(level)                             \
  if (!::kolo::ShouldLog(KOLO_LOG_LEVEL_##level)) { \
  } else                                            \
    ::kolo::LogMessage(KOLO_LOG_LEVEL_##level, __FILE__, __LINE__).stream()

#define KOLO_CHECK(cond)                                                   \
  if (cond) {                                                              \
  } else                                                                   \
    ::kolo::LogMessage(::kolo::LogLevel::kError, __FILE__, __LINE__, true) \
            .stream()                                                      \
        << "check failed: " #cond " "

#define KOLO_CHECK_EQ(a, b)                                                \
  if ((a) == (b)) {                                                        \
  } else                                                                   \
    ::kolo::LogMessage(::kolo::LogLevel::kError, __FILE__, __LINE__, true) \
            .stream()                                                      \
        << "check failed: " #a " == " #b " (" << (a) << " vs " << (b) << ") "

#endif  // KOLO_COMMON_LOGGING_H_
