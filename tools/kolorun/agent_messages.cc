#include "agent_messages.h"

#include <limits>
#include <nlohmann/json.hpp>
#include <utility>

namespace kolo {
namespace kolorun {
namespace {

using Json = nlohmann::json;

// The JSON type of `value`, as an error names it.
std::string KindOf(const Json& value) {
  switch (value.type()) {
    case Json::value_t::null: return "null";
    case Json::value_t::boolean: return "a boolean";
    case Json::value_t::number_integer:
    case Json::value_t::number_unsigned: return "an integer";
    case Json::value_t::number_float: return "a number with a fraction";
    case Json::value_t::string: return "a string";
    case Json::value_t::array: return "an array";
    default: return "an object";
  }
}

// Reads the keys of one JSON object into a struct, and keeps the first
// error, named by the key's path ("targets[1].port"). Once an error is
// kept, further reads do nothing.
class Reader {
 public:
  Reader(const Json& object, std::string path, std::string* error)
      : object_(object), path_(std::move(path)), error_(error) {}

  // A key that may be missing keeps the value it has.
  void Read(const char* key, std::string* out, bool optional = false) {
    if (const Json* value = Find(key, optional, Json::value_t::string))
      *out = value->get<std::string>();
  }
  void Read(const char* key, bool* out, bool optional = false) {
    if (const Json* value = Find(key, optional, Json::value_t::boolean))
      *out = value->get<bool>();
  }
  void Read(const char* key, int64_t* out, int64_t min, int64_t max) {
    const Json* value = Find(key, false, Json::value_t::number_integer);
    if (value == nullptr) return;
    // A number beyond int64's range is out of every range here.
    const bool in_range =
        value->is_number_unsigned()
            ? value->get<uint64_t>() <= static_cast<uint64_t>(max) &&
                  (min <= 0 ||
                   value->get<uint64_t>() >= static_cast<uint64_t>(min))
            : value->get<int64_t>() >= min && value->get<int64_t>() <= max;
    if (!in_range) {
      Fail(Path(key) + " is " + value->dump() + ", outside " +
           std::to_string(min) + ".." + std::to_string(max));
      return;
    }
    *out = value->get<int64_t>();
  }
  void Read(const char* key, int32_t* out, int32_t min,
            int32_t max = std::numeric_limits<int32_t>::max()) {
    int64_t wide = *out;
    Read(key, &wide, min, max);
    *out = static_cast<int32_t>(wide);
  }
  void Read(const char* key, std::vector<std::string>* out) {
    const Json* list = Find(key, false, Json::value_t::array);
    if (list == nullptr) return;
    out->clear();
    for (size_t i = 0; i < list->size(); ++i) {
      const Json& item = (*list)[i];
      if (!item.is_string()) {
        Fail(Path(key, "[" + std::to_string(i) + "]") +
             " should be a string, not " + KindOf(item));
        return;
      }
      out->push_back(item.get<std::string>());
    }
  }
  // An array of objects, each read by its ReadFields(Reader&, T*) (found
  // where the template is used).
  template <typename T>
  void ReadObjects(const char* key, std::vector<T>* out) {
    const Json* list = Find(key, false, Json::value_t::array);
    if (list == nullptr) return;
    out->assign(list->size(), T());
    for (size_t i = 0; i < list->size() && error_->empty(); ++i)
      ReadObject(Key(key) + "[" + std::to_string(i) + "]", (*list)[i],
                 &(*out)[i]);
  }
  // An object under `key`, read by its ReadFields(Reader&, T*).
  template <typename T>
  void ReadObject(const char* key, T* out) {
    if (const Json* value = Find(key, false, Json::value_t::object))
      ReadObject(Key(key), *value, out);
  }
  bool Has(const char* key) const { return object_.contains(key); }
  // The value under `key` if it is there with the JSON type `kind`; else
  // null, with an error unless it may be missing and is.
  const Json* Find(const char* key, bool optional, Json::value_t kind) {
    if (!error_->empty()) return nullptr;
    auto found = object_.find(key);
    if (found == object_.end()) {
      if (!optional) Fail(Path(key) + " is missing");
      return nullptr;
    }
    const bool integer = kind == Json::value_t::number_integer;
    const bool fits =
        integer ? found->is_number_integer() : found->type() == kind;
    if (!fits) {
      Fail(Path(key) + " should be " + KindOf(integer ? Json(0) : Json(kind)) +
           ", not " + KindOf(*found));
      return nullptr;
    }
    return &*found;
  }
  void Fail(const std::string& why) {
    if (error_->empty()) *error_ = why;
  }
  // The key's path from the message, quoted: "'targets[1].port'".
  std::string Path(const char* key, const std::string& suffix = "") const {
    return "'" + Key(key) + suffix + "'";
  }

 private:
  std::string Key(const char* key) const {
    return (path_.empty() ? "" : path_ + ".") + key;
  }

  // `path` (unquoted) names `value`, and prefixes the keys inside it.
  template <typename T>
  void ReadObject(const std::string& path, const Json& value, T* out) {
    if (!value.is_object()) {
      Fail("'" + path + "' should be an object, not " + KindOf(value));
      return;
    }
    Reader inner(value, path, error_);
    ReadFields(inner, out);
  }

  const Json& object_;
  const std::string path_;
  std::string* const error_;
};

Json Typed(const char* type) { return Json{{"type", type}}; }

// Each message's keys, once for writing and once for reading.

void ReadFields(Reader& in, PreflightRequest* message) {
  in.Read("program", &message->program);
  in.Read("cwd", &message->cwd);
  in.Read("network_interface", &message->network_interface);
}

void ReadFields(Reader& in, AgentAddress* address) {
  in.Read("interface", &address->interface);
  in.Read("address", &address->address);
  in.Read("prefix", &address->prefix, 0, 128);
  in.Read("port", &address->port, 0, 65535);
}

void ReadFields(Reader& in, PreflightReply* message) {
  in.Read("hostname", &message->hostname);
  in.Read("program", &message->program, /*optional=*/true);
  in.ReadObjects("addresses", &message->addresses);
  in.Read("error", &message->error, /*optional=*/true);
}

void ReadFields(Reader& in, ProbeTarget* target) {
  in.Read("host", &target->host);
  in.Read("address", &target->address);
  in.Read("port", &target->port, 0, 65535);
}

void ReadFields(Reader& in, ProbeRequest* message) {
  in.ReadObjects("targets", &message->targets);
  in.Read("timeout_ms", &message->timeout_ms, 0,
          std::numeric_limits<int64_t>::max());
}

void ReadFields(Reader& in, ProbeResult* result) {
  in.Read("host", &result->host);
  in.Read("address", &result->address);
  in.Read("error", &result->error);
}

void ReadFields(Reader& in, ProbeReply* message) {
  in.ReadObjects("results", &message->results);
}

void ReadFields(Reader& in, HostRanks* ranks) {
  in.Read("first_rank", &ranks->first_rank, 0);
  in.Read("local_size", &ranks->local_size, 0);
  in.Read("size", &ranks->size, 0);
  in.Read("cross_rank", &ranks->cross_rank, 0);
  in.Read("cross_size", &ranks->cross_size, 0);
}

void ReadFields(Reader& in, LaunchMetrics* metrics) {
  in.Read("port", &metrics->port, 0, 65535);
  in.Read("address", &metrics->address);
  in.Read("job", &metrics->job);
}

// [name, value]: an array of two strings.
void ReadSettings(Reader& in, EnvList* settings) {
  const Json* pairs = in.Find("settings", false, Json::value_t::array);
  if (pairs == nullptr) return;
  for (size_t i = 0; i < pairs->size(); ++i) {
    const Json& pair = (*pairs)[i];
    if (!pair.is_array() || pair.size() != 2 || !pair[0].is_string() ||
        !pair[1].is_string()) {
      in.Fail("'settings[" + std::to_string(i) +
              "]' should be [name, value], two strings, not " + pair.dump());
      return;
    }
    settings->emplace_back(pair[0].get<std::string>(),
                           pair[1].get<std::string>());
  }
}

void ReadFields(Reader& in, LaunchRequest* message) {
  in.Read("host", &message->ranks.host);
  in.ReadObject("ranks", &message->ranks);
  in.Read("command", &message->command);
  ReadSettings(in, &message->settings);
  std::string bind_to;
  in.Read("bind_to", &bind_to);
  if (bind_to == "core") {
    message->bind_to = BindTo::kCore;
  } else if (bind_to == "none") {
    message->bind_to = BindTo::kNone;
  } else {
    in.Fail("'bind_to' should be \"core\" or \"none\", not \"" + bind_to +
            "\"");
  }
  in.Read("verbose", &message->verbose);
  in.Read("tag", &message->tag, /*optional=*/true);
  in.Read("name", &message->name, /*optional=*/true);
  if (in.Has("metrics")) {
    message->metrics.emplace();
    in.ReadObject("metrics", &*message->metrics);
  }
}

Json ToJson(const AgentAddress& address) {
  return {{"interface", address.interface},
          {"address", address.address},
          {"prefix", address.prefix},
          {"port", address.port}};
}

Json ToJson(const ProbeTarget& target) {
  return {{"host", target.host},
          {"address", target.address},
          {"port", target.port}};
}

Json ToJson(const ProbeResult& result) {
  return {{"host", result.host},
          {"address", result.address},
          {"error", result.error}};
}

template <typename T>
Json ArrayOf(const std::vector<T>& items) {
  Json array = Json::array();
  for (const T& item : items) array.push_back(ToJson(item));
  return array;
}

// The "type" of a message, empty when it has none or not as a string.
std::string TypeOf(const Json& message) {
  auto type = message.find("type");
  return type != message.end() && type->is_string() ? type->get<std::string>()
                                                    : std::string();
}

}  // namespace

std::string SerializeMessage(const PreflightRequest& message) {
  Json json = Typed(PreflightRequest::kType);
  json["program"] = message.program;
  json["cwd"] = message.cwd;
  json["network_interface"] = message.network_interface;
  return json.dump();
}

std::string SerializeMessage(const PreflightReply& message) {
  Json json = Typed(PreflightReply::kType);
  json["hostname"] = message.hostname;
  if (!message.program.empty()) json["program"] = message.program;
  json["addresses"] = ArrayOf(message.addresses);
  if (!message.error.empty()) json["error"] = message.error;
  return json.dump();
}

std::string SerializeMessage(const ProbeRequest& message) {
  Json json = Typed(ProbeRequest::kType);
  json["targets"] = ArrayOf(message.targets);
  json["timeout_ms"] = message.timeout_ms;
  return json.dump();
}

std::string SerializeMessage(const ProbeReply& message) {
  Json json = Typed(ProbeReply::kType);
  json["results"] = ArrayOf(message.results);
  return json.dump();
}

std::string SerializeMessage(const LaunchRequest& message) {
  Json json = Typed(LaunchRequest::kType);
  const HostRanks& ranks = message.ranks;
  json["host"] = ranks.host;
  json["ranks"] = {{"first_rank", ranks.first_rank},
                   {"local_size", ranks.local_size},
                   {"size", ranks.size},
                   {"cross_rank", ranks.cross_rank},
                   {"cross_size", ranks.cross_size}};
  json["command"] = message.command;
  json["settings"] = Json::array();
  for (const auto& [name, value] : message.settings)
    json["settings"].push_back({name, value});
  json["bind_to"] = message.bind_to == BindTo::kCore ? "core" : "none";
  json["verbose"] = message.verbose;
  if (!message.tag.empty()) json["tag"] = message.tag;
  if (!message.name.empty()) json["name"] = message.name;
  if (message.metrics) {
    json["metrics"] = {{"port", message.metrics->port},
                       {"address", message.metrics->address},
                       {"job", message.metrics->job}};
  }
  return json.dump();
}

template <typename Message>
StatusOr<Message> ParseMessage(const std::string& line,
                               const std::string& from) {
  const std::string bad =
      std::string("bad '") + Message::kType + "' message from " + from + ": ";
  if (line.size() > kMaxAgentMessageBytes) {
    return InvalidArgument(bad + std::to_string(line.size()) +
                           " bytes, more than the " +
                           std::to_string(kMaxAgentMessageBytes) + " allowed");
  }
  Json json = Json::parse(line, nullptr, /*allow_exceptions=*/false);
  if (json.is_discarded()) return InvalidArgument(bad + "not JSON");
  if (!json.is_object())
    return InvalidArgument(bad + "not an object but " + KindOf(json));
  const std::string type = TypeOf(json);
  if (type != Message::kType)
    return InvalidArgument(bad + "its type is '" + type + "'");
  Message message;
  std::string error;
  Reader in(json, "", &error);
  ReadFields(in, &message);
  if (!error.empty()) return InvalidArgument(bad + error);
  return message;
}

template StatusOr<PreflightRequest> ParseMessage(const std::string&,
                                                 const std::string&);
template StatusOr<PreflightReply> ParseMessage(const std::string&,
                                               const std::string&);
template StatusOr<ProbeRequest> ParseMessage(const std::string&,
                                             const std::string&);
template StatusOr<ProbeReply> ParseMessage(const std::string&,
                                           const std::string&);
template StatusOr<LaunchRequest> ParseMessage(const std::string&,
                                              const std::string&);

bool IsMessageOfType(const std::string& line, const std::string& type) {
  if (line.size() > kMaxAgentMessageBytes) return false;
  const Json json = Json::parse(line, nullptr, /*allow_exceptions=*/false);
  return json.is_object() && TypeOf(json) == type;
}

}  // namespace kolorun
}  // namespace kolo
