#include "noderuntime/prober/node_annotator.h"

#include <nlohmann/json.hpp>
#include <stdexcept>

#include "kube/resource.h"

namespace tessel::prober {

void publish_node_links(kube::Client& client, const std::string& node,
                        const api::NodeLinks& links) {
  const std::string value = api::format_node_links(links);
  if (value.size() > api::kMaxLinksAnnotationBytes) {
    throw std::invalid_argument("Node " + node + ": annotation " + api::kLinksAnnotation +
                                " would be " + std::to_string(value.size()) +
                                " bytes, over the limit of " +
                                std::to_string(api::kMaxLinksAnnotationBytes));
  }
  static const kube::ResourceInfo nodes = *kube::ResourceRegistry().find_kind("v1", "Node");
  const nlohmann::json patch = {{"metadata", {{"annotations", {{api::kLinksAnnotation, value}}}}}};
  kube::PatchOptions options;
  options.field_manager = kProberFieldManager;
  client.patch(nodes, "", node, kube::PatchType::kMerge, patch, options);
}

}  // namespace tessel::prober
