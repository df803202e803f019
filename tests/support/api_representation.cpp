#include "tests/support/api_representation.h"

namespace tessel::testing {
namespace {

using nlohmann::json;

std::string rows_object(const std::string& include_object) {
  return include_object.empty() ? "Metadata" : include_object;
}

json list_metadata(const ListResult& list) {
  json metadata = {{"resourceVersion", std::to_string(list.resource_version)}};
  if (!list.continue_token.empty()) metadata["continue"] = list.continue_token;
  if (list.remaining_item_count) metadata["remainingItemCount"] = *list.remaining_item_count;
  return metadata;
}

}  // namespace

json table_of_list(const ResourceType& type, const ListResult& list,
                   const std::string& include_object, const std::string& api_version) {
  json table = type.table->table(list.items, rows_object(include_object), list_metadata(list));
  table["apiVersion"] = api_version;
  return table;
}

json table_of_one(const ResourceType& type, const json& object, const std::string& include_object,
                  const std::string& api_version) {
  const json metadata = {
      {"resourceVersion", object.value("metadata", json::object()).value("resourceVersion", "")}};
  json table = type.table->table({object}, rows_object(include_object), metadata);
  table["apiVersion"] = api_version;
  return table;
}

json partial_object_metadata(const json& object, const std::string& api_version) {
  return {{"kind", "PartialObjectMetadata"},
          {"apiVersion", api_version},
          {"metadata", object.value("metadata", json::object())}};
}

json partial_object_metadata_list(const ListResult& list, const std::string& api_version) {
  json items = json::array();
  for (const json& item : list.items) items.push_back(partial_object_metadata(item, api_version));
  return {{"kind", "PartialObjectMetadataList"},
          {"apiVersion", api_version},
          {"metadata", list_metadata(list)},
          {"items", items}};
}

}  // namespace tessel::testing
