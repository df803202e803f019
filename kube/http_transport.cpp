#include "kube/http_transport.h"

#include <algorithm>
#include <cctype>

namespace tessel::kube {

std::optional<std::string> HttpResponse::header(std::string_view name) const {
  for (const auto& [key, value] : headers) {
    if (std::ranges::equal(key, name, [](char a, char b) {
          return std::tolower(static_cast<unsigned char>(a)) ==
                 std::tolower(static_cast<unsigned char>(b));
        })) {
      return value;
    }
  }
  return std::nullopt;
}

}  // namespace tessel::kube
