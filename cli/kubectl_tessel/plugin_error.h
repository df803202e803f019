// What the plugin cannot show, said to its user: the message names the object (kind,
// namespace/name, member) and the field at fault. main() prints it and exits 1.
#pragma once

#include <stdexcept>

namespace tessel::kubectl_tessel {

class PluginError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

}  // namespace tessel::kubectl_tessel
