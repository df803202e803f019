// The meta.k8s.io/v1 Table kube-apiserver answers for
// `Accept: application/json;as=Table;v=v1;g=meta.k8s.io` (kubectl get): columns from a CRD
// version's additionalPrinterColumns, or the built-in printers' columns for built-in kinds.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace tessel::testing {

struct TableColumns;  // table_converter_columns.h

// meta.k8s.io/v1 Table, as Accept: application/json;as=Table;v=v1;g=meta.k8s.io
class TableConverter {
 public:
  // The wall clock that date cells ("13s", "5m") are measured against.
  using WallClock = std::function<std::chrono::system_clock::time_point()>;

  // One entry of a CRD's spec.versions: additionalPrinterColumns (Name first; Age when the
  // CRD gives none), JSONPath evaluation. Throws std::invalid_argument naming the column whose
  // type, format, priority or jsonPath is not accepted.
  static TableConverter for_crd_version(const nlohmann::json& crd_version);
  // nodes, pods, namespaces, events, leases, ...; else the default Name / Created At.
  static TableConverter for_builtin(const std::string& group, const std::string& resource);

  // include_object: "None", "Metadata" (the default, also for ""), "Object"; anything else
  // throws std::invalid_argument(`unrecognized includeObject value: "X"`), which the server
  // answers with 400 BadRequest. list_metadata: the list's metadata (resourceVersion, continue,
  // remainingItemCount are carried over).
  nlohmann::json table(const std::vector<nlohmann::json>& objects,
                       const std::string& include_object,
                       const nlohmann::json& list_metadata) const;
  // The Table of one object, as a GET or a watch event with as=Table carries it (metadata:
  // the object's resourceVersion). A watch sends the column definitions with its first event
  // only; later events pass with_column_definitions = false ("columnDefinitions": null).
  nlohmann::json table_of_one(const nlohmann::json& object, const std::string& include_object,
                              bool with_column_definitions = true) const;

  // Replaces the system clock (tests).
  void set_clock(WallClock now);

 private:
  explicit TableConverter(std::shared_ptr<const TableColumns> columns);

  std::shared_ptr<const TableColumns> columns_;
  WallClock now_;
};

}  // namespace tessel::testing
