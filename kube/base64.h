// Standard base64 (RFC 4648 section 4, alphabet A-Z a-z 0-9 + /, '=' padding), as used by the
// *-data fields of a kubeconfig and by Secret data.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace tessel::kube {

// Padded standard base64 of any bytes.
std::string base64_encode(std::string_view bytes);

// Decodes padded standard base64. Whitespace (space, tab, CR, LF) is skipped wherever it
// appears, as in PEM bodies and wrapped kubeconfig data. Returns nullopt for a character
// outside the alphabet, missing or misplaced padding, or data after the padding. The unused
// low bits of the last group are ignored, as Go's StdEncoding (and so kubectl) does.
std::optional<std::string> base64_decode(std::string_view text);

}  // namespace tessel::kube
