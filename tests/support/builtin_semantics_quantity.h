// Kubernetes resource quantities ("100m", "1Gi", "2e3"): parsing for comparison (requests
// against limits, QoS classes), as k8s.io/apimachinery's resource.Quantity reads them.
#pragma once

#include <optional>
#include <string>

namespace tessel::testing {

// The quantity's value in base units (1 for "1000m"), or nullopt when it is not a quantity.
std::optional<long double> parse_quantity(const std::string& text);

// The message kube-apiserver's decoder gives for a malformed quantity.
inline constexpr const char* kQuantityFormatError =
    "quantities must match the regular expression "
    "'^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'";

}  // namespace tessel::testing
