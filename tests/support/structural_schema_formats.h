// The string formats kube-apiserver checks in custom resources (go-openapi's strfmt registry,
// restricted to apiextensions' supported formats).
#pragma once

#include <string>

namespace tessel::testing {

// Whether `value` is a valid instance of `format` ("date-time", "uuid", "ipv4", ...; dashes in
// the name do not matter). Unknown formats accept everything: kube-apiserver drops them.
bool format_accepts(const std::string& format, const std::string& value);

}  // namespace tessel::testing
