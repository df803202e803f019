// decode_error: what makes kube-apiserver's decoder refuse a built-in object with a 400
// before validation, with Go's own error texts (time.Parse, encoding/base64, encoding/json).
#include <optional>
#include <string>
#include <vector>

#include "tests/support/builtin_semantics.h"
#include "tests/support/builtin_semantics_quantity.h"

namespace tessel::testing {
namespace {

using json = nlohmann::json;

constexpr const char* kTimeLayout = "2006-01-02T15:04:05Z07:00";              // metav1.Time
constexpr const char* kMicroTimeLayout = "2006-01-02T15:04:05.000000Z07:00";  // metav1.MicroTime

// Go's strconv.Quote as time.ParseError uses it (ASCII-printable values pass through).
std::string quote(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + "\"";
}

bool digit_at(const std::string& s, std::size_t i) {
  return i < s.size() && s[i] >= '0' && s[i] <= '9';
}

// Go's time.Parse for the two layouts above: nullopt when `value` parses, else the error text.
class GoTimeParser {
 public:
  GoTimeParser(std::string layout, std::string value)
      : layout_(std::move(layout)), value_(std::move(value)) {}

  std::optional<std::string> error() {
    // The layout as Go splits it: a literal prefix, then a standard element.
    struct Chunk {
      std::string prefix;
      std::string element;
    };
    std::vector<Chunk> chunks = {{"", "2006"}, {"-", "01"}, {"-", "02"},
                                 {"T", "15"},  {":", "04"}, {":", "05"}};
    const bool micro = layout_ == kMicroTimeLayout;
    if (micro) chunks.push_back({"", ".000000"});
    chunks.push_back({"", "Z07:00"});

    std::string rest = value_;
    int year = 0;
    int month = 0;
    int day = 0;
    for (std::size_t c = 0; c < chunks.size(); ++c) {
      const auto& chunk = chunks[c];
      if (!skip(rest, chunk.prefix)) return cannot_parse(rest, chunk.prefix);
      const std::string hold = rest;
      bool bad = false;
      std::string range;
      const std::string& e = chunk.element;
      if (e == "2006") {
        if (rest.size() < 4 || !digit_at(rest, 0)) {
          bad = true;
        } else {
          bad = !all_digits(rest.substr(0, 4));
          if (!bad) year = std::stoi(rest.substr(0, 4));
          rest = rest.substr(4);
        }
      } else if (e == "01" || e == "02" || e == "04" || e == "05" || e == "15") {
        int n = 0;
        bad = !number(rest, e != "15", n);
        if (!bad) {
          if (e == "01") {
            month = n;
            if (n <= 0 || n > 12) range = "month";
          } else if (e == "02") {
            day = n;
          } else if (e == "15" && n >= 24) {
            range = "hour";
          } else if (e == "04" && n >= 60) {
            range = "minute";
          } else if (e == "05") {
            if (n >= 60) range = "second";
            // A fraction the layout does not ask for is accepted after the seconds.
            if (!micro && range.empty() && rest.size() >= 2 && (rest[0] == '.' || rest[0] == ',') &&
                digit_at(rest, 1)) {
              std::size_t n_end = 2;
              while (digit_at(rest, n_end)) ++n_end;
              rest = rest.substr(n_end);
            }
          }
        }
      } else if (e == ".000000") {
        if (rest.size() < 7 || (rest[0] != '.' && rest[0] != ',') ||
            !all_digits(rest.substr(1, 6))) {
          bad = true;
        } else {
          rest = rest.substr(7);
        }
      } else {  // Z07:00
        if (!rest.empty() && rest[0] == 'Z') {
          rest = rest.substr(1);
        } else if (rest.size() < 6 || rest[3] != ':' || (rest[0] != '+' && rest[0] != '-') ||
                   !all_digits(rest.substr(1, 2)) || !all_digits(rest.substr(4, 2))) {
          bad = true;
        } else {
          rest = rest.substr(6);
        }
      }
      if (!range.empty()) return "parsing time " + quote(value_) + ": " + range + " out of range";
      if (bad) return cannot_parse(hold, e);
    }
    if (!rest.empty()) return "parsing time " + quote(value_) + ": extra text: " + quote(rest);
    if (day < 1 || day > days_in(month, year)) {
      return "parsing time " + quote(value_) + ": day out of range";
    }
    return std::nullopt;
  }

 private:
  static bool all_digits(const std::string& s) {
    return !s.empty() && s.find_first_not_of("0123456789") == std::string::npos;
  }
  static int days_in(int month, int year) {
    static const int days[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    const bool leap = (year % 4 == 0 && year % 100 != 0) || year % 400 == 0;
    return month == 2 && leap ? 29 : days[month - 1];
  }
  // Go's getnum: one or two digits, exactly two when fixed.
  static bool number(std::string& s, bool fixed, int& out) {
    if (!digit_at(s, 0)) return false;
    if (!digit_at(s, 1)) {
      if (fixed) return false;
      out = s[0] - '0';
      s = s.substr(1);
      return true;
    }
    out = (s[0] - '0') * 10 + (s[1] - '0');
    s = s.substr(2);
    return true;
  }
  static bool skip(std::string& value, const std::string& prefix) {
    for (char p : prefix) {
      if (value.empty() || value[0] != p) return false;
      value = value.substr(1);
    }
    return true;
  }
  std::string cannot_parse(const std::string& value_element, const std::string& layout_element) {
    return "parsing time " + quote(value_) + " as " + quote(layout_) + ": cannot parse " +
           quote(value_element) + " as " + quote(layout_element);
  }

  std::string layout_;
  std::string value_;
};

std::optional<std::string> time_error(const json& value, const char* layout) {
  if (value.is_null()) return std::nullopt;
  if (!value.is_string()) {
    return "json: cannot unmarshal " +
           std::string(value.is_number()    ? "number"
                       : value.is_boolean() ? "bool"
                       : value.is_array()   ? "array"
                                            : "object") +
           " into Go value of type string";
  }
  return GoTimeParser(layout, value.get<std::string>()).error();
}

// Go's base64.StdEncoding.Decode: the offset of the first corrupt byte, or nullopt.
std::optional<std::size_t> base64_error(const std::string& src) {
  auto value_of = [](char c) {
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '+' ||
           c == '/';
  };
  auto newline = [](char c) { return c == '\n' || c == '\r'; };
  std::size_t si = 0;
  while (si < src.size()) {
    for (int j = 0; j < 4; ++j) {
      if (si == src.size()) {
        if (j == 0) return std::nullopt;
        return si - static_cast<std::size_t>(j);
      }
      const char in = src[si++];
      if (value_of(in)) continue;
      if (newline(in)) {
        --j;
        continue;
      }
      if (in != '=' || j < 2) return si - 1;
      if (j == 2) {  // "==" expected
        while (si < src.size() && newline(src[si])) ++si;
        if (si == src.size()) return src.size();
        if (src[si] != '=') return si - 1;
        ++si;
      }
      while (si < src.size() && newline(src[si])) ++si;
      if (si < src.size()) return si;  // data after the padding
      return std::nullopt;
    }
  }
  return std::nullopt;
}

// The time fields of a kind with their layouts; the first error wins.
using TimeFields = std::vector<std::pair<std::vector<std::string>, const char*>>;

const json* at_path(const json& object, const std::vector<std::string>& path) {
  const json* node = &object;
  for (const auto& p : path) {
    if (!node->is_object() || !node->contains(p)) return nullptr;
    node = &(*node)[p];
  }
  return node;
}

std::optional<std::string> first_time_error(const json& object, const TimeFields& fields) {
  for (const auto& [path, layout] : fields) {
    if (const json* v = at_path(object, path); v != nullptr) {
      if (auto error = time_error(*v, layout)) return error;
    }
  }
  return std::nullopt;
}

std::optional<std::string> condition_time_errors(const json& object,
                                                 std::initializer_list<const char*> fields) {
  const json* conditions = at_path(object, {"status", "conditions"});
  if (conditions == nullptr || !conditions->is_array()) return std::nullopt;
  for (const auto& condition : *conditions) {
    for (const char* f : fields) {
      if (condition.is_object() && condition.contains(f)) {
        if (auto error = time_error(condition[f], kTimeLayout)) return error;
      }
    }
  }
  return std::nullopt;
}

// resource.Quantity's decoder: numbers and strings that parse, nothing else.
std::optional<std::string> quantity_errors(const json* list) {
  if (list == nullptr || !list->is_object()) return std::nullopt;
  for (const auto& [name, value] : list->items()) {
    const bool parses =
        value.is_number() || (value.is_string() && parse_quantity(value.get<std::string>()));
    if (!parses) return std::string(kQuantityFormatError);
  }
  return std::nullopt;
}

// encoding/json's name of a JSON value's type in "cannot unmarshal <type> into ...".
std::string json_type(const json& value) {
  if (value.is_string()) return "string";
  if (value.is_number()) return "number";
  if (value.is_boolean()) return "bool";
  return value.is_array() ? "array" : "object";
}

// A Validating/MutatingWebhookConfiguration whose lists are not lists, whose timeoutSeconds is
// not a number, or whose caBundle ([]byte) is not base64.
std::optional<std::string> webhook_configuration_error(const std::string& kind,
                                                       const json& object) {
  const std::string hook =
      kind == "ValidatingWebhookConfiguration" ? "ValidatingWebhook" : "MutatingWebhook";
  auto cannot = [](const json& value, const std::string& field, const std::string& type) {
    return "json: cannot unmarshal " + json_type(value) + " into Go struct field " + field +
           " of type " + type;
  };
  if (!object.contains("webhooks") || object["webhooks"].is_null()) return std::nullopt;
  const json& webhooks = object["webhooks"];
  if (!webhooks.is_array()) return cannot(webhooks, kind + ".webhooks", "[]v1." + hook);
  for (const json& webhook : webhooks) {
    if (!webhook.is_object()) return cannot(webhook, kind + ".webhooks", "v1." + hook);
    const json rules = webhook.value("rules", json());
    if (!rules.is_null() && !rules.is_array()) {
      return cannot(rules, hook + ".webhooks.rules", "[]v1.RuleWithOperations");
    }
    const json timeout = webhook.value("timeoutSeconds", json());
    if (!timeout.is_null() && !timeout.is_number_integer()) {
      return cannot(timeout, hook + ".webhooks.timeoutSeconds", "int32");
    }
    const json ca = webhook.value("clientConfig", json::object()).value("caBundle", json());
    if (ca.is_string()) {
      if (auto offset = base64_error(ca.get<std::string>())) {
        return "illegal base64 data at input byte " + std::to_string(*offset);
      }
    } else if (!ca.is_null()) {
      return cannot(ca, hook + ".webhooks.clientConfig.caBundle", "[]uint8");
    }
  }
  return std::nullopt;
}

std::optional<std::string> kind_error(const ApiResource& info, const json& object) {
  const TimeFields meta = {{{"metadata", "creationTimestamp"}, kTimeLayout},
                           {{"metadata", "deletionTimestamp"}, kTimeLayout}};
  if (auto error = first_time_error(object, meta)) return error;
  if (const json* managed = at_path(object, {"metadata", "managedFields"});
      managed != nullptr && managed->is_array()) {
    for (const auto& entry : *managed) {
      if (entry.is_object() && entry.contains("time")) {
        if (auto error = time_error(entry["time"], kTimeLayout)) return error;
      }
    }
  }
  const std::string& group = info.group;
  const std::string& kind = info.kind;
  if (group == "coordination.k8s.io" && kind == "Lease") {
    return first_time_error(object, {{{"spec", "acquireTime"}, kMicroTimeLayout},
                                     {{"spec", "renewTime"}, kMicroTimeLayout}});
  }
  if (group.empty() && kind == "Event") {
    return first_time_error(object, {{{"firstTimestamp"}, kTimeLayout},
                                     {{"lastTimestamp"}, kTimeLayout},
                                     {{"eventTime"}, kMicroTimeLayout},
                                     {{"series", "lastObservedTime"}, kMicroTimeLayout}});
  }
  if (group == "events.k8s.io" && kind == "Event") {
    return first_time_error(object, {{{"eventTime"}, kMicroTimeLayout},
                                     {{"deprecatedFirstTimestamp"}, kTimeLayout},
                                     {{"deprecatedLastTimestamp"}, kTimeLayout},
                                     {{"series", "lastObservedTime"}, kMicroTimeLayout}});
  }
  if (group.empty() && kind == "Pod") {
    if (const json* spec = at_path(object, {"spec"}); spec != nullptr && spec->is_object()) {
      for (const char* list : {"initContainers", "containers"}) {
        if (!spec->contains(list) || !(*spec)[list].is_array()) continue;
        for (const auto& c : (*spec)[list]) {
          if (auto error = quantity_errors(at_path(c, {"resources", "limits"}))) return error;
          if (auto error = quantity_errors(at_path(c, {"resources", "requests"}))) return error;
        }
      }
    }
    if (auto error = first_time_error(object, {{{"status", "startTime"}, kTimeLayout}})) {
      return error;
    }
    return condition_time_errors(object, {"lastProbeTime", "lastTransitionTime"});
  }
  if (group.empty() && kind == "Node") {
    if (auto error = quantity_errors(at_path(object, {"status", "capacity"}))) return error;
    if (auto error = quantity_errors(at_path(object, {"status", "allocatable"}))) return error;
    return condition_time_errors(object, {"lastHeartbeatTime", "lastTransitionTime"});
  }
  if (group.empty() && (kind == "Namespace" || kind == "Service")) {
    return condition_time_errors(object, {"lastTransitionTime"});
  }
  if (group == "admissionregistration.k8s.io") return webhook_configuration_error(kind, object);
  if (group.empty() && kind == "Secret") {
    if (const json* data = at_path(object, {"data"}); data != nullptr && data->is_object()) {
      for (const auto& [k, v] : data->items()) {
        if (!v.is_string()) continue;
        if (auto offset = base64_error(v.get<std::string>())) {
          return "illegal base64 data at input byte " + std::to_string(*offset);
        }
      }
    }
  }
  return std::nullopt;
}

}  // namespace

std::optional<std::string> decode_error(const ApiResource& info, const json& object) {
  const bool builtin = info.group.empty() || info.group == "coordination.k8s.io" ||
                       info.group == "events.k8s.io" ||
                       info.group == "admissionregistration.k8s.io";
  if (!builtin || !object.is_object()) return std::nullopt;
  if (auto error = kind_error(info, object)) {
    return info.kind + " in version \"" + info.version + "\" cannot be handled as a " + info.kind +
           ": " + *error;
  }
  return std::nullopt;
}

}  // namespace tessel::testing
