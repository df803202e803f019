// A number given on tessel-prober's command line (--budget's, a duration's, --emulate-link's).
#pragma once

#include <optional>
#include <string>

namespace tessel::prober {

// A finite number filling all of `text` (strtod's forms, no leading space); nullopt otherwise.
std::optional<double> parse_flag_number(const std::string& text);

}  // namespace tessel::prober
