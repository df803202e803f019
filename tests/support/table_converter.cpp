// TableConverter: the Table kube-apiserver makes of objects, and the CRD printer columns
// (apiextensions' tableconvertor: Name first, then additionalPrinterColumns, or Age when the
// CRD version declares none).
#include "tests/support/table_converter.h"

#include <cmath>
#include <cstdint>
#include <optional>
#include <set>
#include <stdexcept>
#include <utility>

#include "tests/support/json_path.h"
#include "tests/support/structural_schema_errors.h"
#include "tests/support/table_converter_columns.h"
#include "tests/support/table_converter_time.h"

namespace tessel::testing {
namespace {

using nlohmann::json;

struct CrdColumn {
  std::string type;
  JsonPath path;
};

// An integral float64 encodes as an integer in Go's JSON ("4", not "4.0").
json go_json_number(double value) {
  if (std::trunc(value) == value && std::fabs(value) < 1e15) {
    return static_cast<std::int64_t>(value);
  }
  return value;
}

// tableconvertor's cellForJSONValue (and the JSONPath printer for string columns).
json crd_cell(const std::string& type, const json& value,
              std::chrono::system_clock::time_point now) {
  if (value.is_null()) return nullptr;
  if (type == "string") return json_path_text(value);
  if (type == "integer") {
    if (value.is_number_integer() || value.is_number_unsigned()) return value;
    if (value.is_number_float()) return static_cast<std::int64_t>(value.get<double>());
  } else if (type == "number") {
    if (value.is_number()) return go_json_number(value.get<double>());
  } else if (type == "boolean") {
    if (value.is_boolean()) return value;
  } else if (type == "date") {
    if (value.is_string()) {
      if (value.get<std::string>().empty() || value == "null") return "<unknown>";
      return age_cell(value, now);
    }
  }
  return nullptr;
}

std::string column_at(std::size_t i) {
  return "additionalPrinterColumns[" + std::to_string(i) + "]";
}

const std::string& required_string(const json& column, const std::string& key,
                                   const std::string& at) {
  const auto value = column.find(key);
  if (value == column.end() || !value->is_string() || value->get<std::string>().empty()) {
    throw std::invalid_argument(at + "." + key + ": Required value");
  }
  return value->get_ref<const std::string&>();
}

// A printer column's definition, and how its cells are found.
std::pair<json, CrdColumn> crd_column(const json& column, std::size_t index) {
  const std::string at = column_at(index);
  if (!column.is_object()) throw std::invalid_argument(at + ": Invalid value: must be an object");
  const std::string& name = required_string(column, "name", at);
  const std::string& type = required_string(column, "type", at);
  static const std::set<std::string> types = {"integer", "number", "string", "boolean", "date"};
  if (types.count(type) == 0) {
    throw std::invalid_argument(at + ".type: Unsupported value: " + go_quote(type) +
                                ": supported values: \"boolean\", \"date\", \"integer\", "
                                "\"number\", \"string\"");
  }
  const std::string format = column.value("format", "");
  static const std::set<std::string> formats = {"",     "int32", "int64",     "float",   "double",
                                                "byte", "date",  "date-time", "password"};
  if (formats.count(format) == 0) {
    throw std::invalid_argument(at + ".format: Unsupported value: " + go_quote(format) +
                                ": supported values: \"byte\", \"date\", \"date-time\", "
                                "\"double\", \"float\", \"int32\", \"int64\", \"password\"");
  }
  const json priority = column.value("priority", json(0));
  if (!priority.is_number_integer() || priority.get<std::int64_t>() < 0) {
    throw std::invalid_argument(at + ".priority: Invalid value: " + go_value_text(priority) +
                                ": must be a non-negative integer");
  }
  const std::string& path = required_string(column, "jsonPath", at);
  if (path[0] != '.') {
    throw std::invalid_argument(at + ".jsonPath: Invalid value: " + go_quote(path) +
                                ": must be a simple json path starting with .");
  }
  std::optional<JsonPath> parsed;
  try {
    parsed = JsonPath::parse(path);
  } catch (const std::invalid_argument& error) {
    throw std::invalid_argument(at + ".jsonPath: " + error.what());
  }
  const std::string description = column.value("description", "");
  json definition = column_definition(
      name, type,
      description.empty() ? "Custom resource definition column (in JSONPath format): " + path
                          : description,
      static_cast<int>(priority.get<std::int64_t>()), format);
  return {std::move(definition), CrdColumn{type, *parsed}};
}

std::shared_ptr<const TableColumns> crd_table_columns(const json& crd_version) {
  json printer_columns = crd_version.value("additionalPrinterColumns", json::array());
  if (!printer_columns.is_array()) {
    throw std::invalid_argument("additionalPrinterColumns: Invalid value: must be an array");
  }
  if (printer_columns.empty()) {
    // What the apiextensions server serves for a version without printer columns.
    printer_columns.push_back({{"name", "Age"},
                               {"type", "date"},
                               {"description", kCreationTimestampDescription},
                               {"jsonPath", ".metadata.creationTimestamp"}});
  }
  auto columns = std::make_shared<TableColumns>();
  columns->definitions =
      json::array({column_definition("Name", "string", kNameColumnDescription, 0, "name")});
  std::vector<CrdColumn> parsed;
  for (std::size_t i = 0; i < printer_columns.size(); ++i) {
    auto [definition, column] = crd_column(printer_columns[i], i);
    columns->definitions.push_back(std::move(definition));
    parsed.push_back(std::move(column));
  }
  columns->cells = [parsed](const json& object, std::chrono::system_clock::time_point now) {
    json cells = json::array({object.value("/metadata/name"_json_pointer, std::string())});
    for (const auto& column : parsed) {
      const auto results = column.path.evaluate(object);
      cells.push_back(results.empty() ? json(nullptr) : crd_cell(column.type, results[0], now));
    }
    return cells;
  };
  return columns;
}

json row_object(const json& object, const std::string& include_object) {
  if (include_object == "None") return nullptr;
  if (include_object == "Object") return object;
  return {{"kind", "PartialObjectMetadata"},
          {"apiVersion", "meta.k8s.io/v1"},
          {"metadata", object.value("metadata", json::object())}};
}

void check_include_object(const std::string& include_object) {
  if (include_object != "None" && include_object != "Metadata" && include_object != "Object" &&
      !include_object.empty()) {
    throw std::invalid_argument("unrecognized includeObject value: " + go_quote(include_object));
  }
}

}  // namespace

TableConverter::TableConverter(std::shared_ptr<const TableColumns> columns)
    : columns_(std::move(columns)), now_([] { return std::chrono::system_clock::now(); }) {}

TableConverter TableConverter::for_crd_version(const json& crd_version) {
  return TableConverter(crd_table_columns(crd_version));
}

TableConverter TableConverter::for_builtin(const std::string& group, const std::string& resource) {
  return TableConverter(builtin_table_columns(group, resource));
}

void TableConverter::set_clock(WallClock now) { now_ = std::move(now); }

json TableConverter::table(const std::vector<json>& objects, const std::string& include_object,
                           const json& list_metadata) const {
  check_include_object(include_object);
  const auto now = now_();
  json rows = json::array();
  for (const auto& object : objects) {
    json row = {{"cells", columns_->cells(object, now)},
                {"object", row_object(object, include_object)}};
    if (columns_->conditions) {
      json conditions = columns_->conditions(object);
      if (!conditions.is_null()) row["conditions"] = std::move(conditions);
    }
    rows.push_back(std::move(row));
  }
  if (objects.empty() && columns_->null_rows_when_empty) rows = nullptr;
  json metadata = json::object();
  if (list_metadata.is_object()) {
    const std::string resource_version = list_metadata.value("resourceVersion", "");
    if (!resource_version.empty()) metadata["resourceVersion"] = resource_version;
    const std::string continue_token = list_metadata.value("continue", "");
    if (!continue_token.empty()) metadata["continue"] = continue_token;
    const auto remaining = list_metadata.find("remainingItemCount");
    if (remaining != list_metadata.end() && !remaining->is_null()) {
      metadata["remainingItemCount"] = *remaining;
    }
  }
  return {{"kind", "Table"},
          {"apiVersion", "meta.k8s.io/v1"},
          {"metadata", metadata},
          {"columnDefinitions", columns_->definitions},
          {"rows", rows}};
}

json TableConverter::table_of_one(const json& object, const std::string& include_object,
                                  bool with_column_definitions) const {
  json one = table(
      {object}, include_object,
      {{"resourceVersion", object.value("/metadata/resourceVersion"_json_pointer, std::string())}});
  if (!with_column_definitions) one["columnDefinitions"] = nullptr;
  return one;
}

}  // namespace tessel::testing
