// Where the tessel-stage executable is: given explicitly, else $TESSEL_STAGE_BINARY, else next
// to the running executable (an installed tree), else in the build tree's
// noderuntime/stage/ beside the folder of the running executable (build/cli/tessel).
#pragma once

#include <string>

namespace tessel::launcher {

// Throws LocalJobError listing the places tried when none holds an executable file.
std::string find_stage_binary(const std::string& explicit_path);

}  // namespace tessel::launcher
