// Publishes the prober's measurements on its own Node: a JSON merge patch (RFC 7386) of the one
// annotation net.tessel.dev/links, with the field manager "tessel-prober", so that every other
// annotation, label and field of the Node stays as others wrote it (a merge patch needs no
// resourceVersion: nothing to conflict on, and nothing else to own).
#pragma once

#include <string>

#include "api/link_annotations.h"
#include "kube/client.h"

namespace tessel::prober {

inline constexpr const char* kProberFieldManager = "tessel-prober";

// PATCH /api/v1/nodes/<node>. Throws std::invalid_argument naming the node, the size and the
// limit when the formatted links exceed api::kMaxLinksAnnotationBytes (nothing is sent), and
// kube::ApiError as the API server answers (a missing Node: 404, naming it).
void publish_node_links(kube::Client& client, const std::string& node, const api::NodeLinks& links);

}  // namespace tessel::prober
