// Small text helpers of the plugin's tables, which fit an 80-column terminal.
#pragma once

#include <string>
#include <vector>

namespace tessel::kubectl_tessel {

inline constexpr int kTerminalWidth = 80;

// `text` cut to `width` characters, its middle replaced by '~' ("member-a/gpu-nod~e-17"):
// both the cluster and the node's number stay readable. Unchanged when it fits.
std::string abbreviate(const std::string& text, size_t width);
// `text` padded with spaces to `width` (left-aligned), or abbreviated to it.
std::string cell(const std::string& text, size_t width);
// `text` right-aligned in `width`.
std::string right(const std::string& text, size_t width);
// A number to `digits` significant digits, without trailing zeros ("9.4", "0.0456", "1235").
std::string number(double value, int digits = 4);
// Lines of words joined by `separator`, each at most `width` wide (a word wider starts a line).
std::vector<std::string> wrap_words(const std::vector<std::string>& words, size_t width,
                                    const std::string& separator = "  ");
// `text` broken at spaces into lines at most `width` wide, the lines after the first indented
// by two spaces; each line ends with a newline.
std::string paragraph(const std::string& text, size_t width);
// A line without its trailing spaces.
std::string trim_right(std::string line);

}  // namespace tessel::kubectl_tessel
