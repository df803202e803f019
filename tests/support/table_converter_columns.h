// The columns of one kind's Table and how a row's cells are made: shared by TableConverter's
// CRD columns (table_converter.cpp) and the built-in printers (table_converter_builtin.cpp).
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

namespace tessel::testing {

struct TableColumns {
  nlohmann::json definitions;  // meta.k8s.io/v1 TableColumnDefinitions
  std::function<nlohmann::json(const nlohmann::json& object,
                               std::chrono::system_clock::time_point now)>
      cells;
  // The row's conditions (a completed Pod's); null for none. May be empty.
  std::function<nlohmann::json(const nlohmann::json& object)> conditions;
  // The default convertor answers an empty list with "rows": null, the printers with [].
  bool null_rows_when_empty = false;
};

// ObjectMeta's field descriptions, which the Name and age columns carry.
extern const char* const kNameColumnDescription;
extern const char* const kCreationTimestampDescription;

nlohmann::json column_definition(const std::string& name, const std::string& type,
                                 const std::string& description, int priority = 0,
                                 const std::string& format = "");

// The printer columns kube-apiserver 1.26 has for a built-in resource; the default
// (Name, Created At) for any other.
std::shared_ptr<const TableColumns> builtin_table_columns(const std::string& group,
                                                          const std::string& resource);
// Those of the kinds an installation writes (table_converter_install.cpp); nullptr for others.
std::shared_ptr<const TableColumns> install_table_columns(const std::string& group,
                                                          const std::string& resource);

}  // namespace tessel::testing
