#include "json_file.h"

#include <fmt/format.h>

#include <fstream>
#include <utility>

#include "kolo_internal/files.h"

namespace kolo::bench {

Status WriteFileAtomically(const std::string& path, const std::string& contents,
                           const std::string& flag) {
  return kolo::WriteFileAtomically(path, contents).WithContext(flag);
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
