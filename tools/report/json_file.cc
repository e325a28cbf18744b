#include "json_file.h"

#include <fmt/format.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <utility>

namespace kolo::bench {

Status WriteFileAtomically(const std::string& path, const std::string& contents,
                           const std::string& flag) {
  const std::string tmp = path + ".tmp";
  {
    std::ofstream file(tmp, std::ios::out | std::ios::trunc | std::ios::binary);
    if (!file) {
      return InvalidArgument(fmt::format("{}: cannot open {}: {}", flag, tmp,
                                         std::strerror(errno)));
    }
    file << contents;
    file.close();
    if (!file) {
      return Internal(fmt::format("{}: writing {} failed", flag, tmp));
    }
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    const int error = errno;
    std::remove(tmp.c_str());
    return Internal(fmt::format("{}: renaming {} to {} failed: {}", flag, tmp,
                                path, std::strerror(error)));
  }
  return Status::Ok();
}

Status WriteJsonFile(const std::string& path, const nlohmann::json& json) {
  return WriteFileAtomically(path, json.dump(2) + "\n", "--json");
}

Status AppendJsonRecord(const std::string& path, nlohmann::json record) {
  nlohmann::json history = nlohmann::json::array();
  std::ifstream in(path);
  if (in) {
    nlohmann::json old =
        nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
    if (old.is_array()) {
      history = std::move(old);
    } else if (old.is_object()) {
      history.push_back(std::move(old));
    } else {
      return InvalidArgument(fmt::format(
          "--json: {} holds something other than kolo-bench JSON; give "
          "--json a new file",
          path));
    }
  }
  history.push_back(std::move(record));
  return WriteJsonFile(path, history);
}

}  // namespace kolo::bench
