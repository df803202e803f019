#include "noderuntime/launcher/stage_binary.h"

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <vector>

#include "noderuntime/launcher/yaml_fields.h"

namespace tessel::launcher {
namespace {

namespace fs = std::filesystem;

bool is_executable(const std::string& path) {
  std::error_code ec;
  return fs::is_regular_file(path, ec) && access(path.c_str(), X_OK) == 0;
}

}  // namespace

std::string find_stage_binary(const std::string& explicit_path) {
  if (!explicit_path.empty()) {
    if (!is_executable(explicit_path)) {
      throw LocalJobError("--stage-binary: '" + explicit_path + "' is not an executable file");
    }
    return explicit_path;
  }
  if (const char* from_env = std::getenv("TESSEL_STAGE_BINARY"); from_env && *from_env) {
    if (!is_executable(from_env)) {
      throw LocalJobError(std::string("TESSEL_STAGE_BINARY: '") + from_env +
                          "' is not an executable file");
    }
    return from_env;
  }
  std::vector<std::string> tried;
  std::error_code ec;
  const fs::path self = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    const fs::path dir = self.parent_path();
    for (const fs::path& candidate :
         {dir / "tessel-stage", dir.parent_path() / "noderuntime" / "stage" / "tessel-stage"}) {
      if (is_executable(candidate.string())) return candidate.string();
      tried.push_back(candidate.string());
    }
  }
  std::string places;
  for (const std::string& t : tried) places += ", " + t;
  throw LocalJobError("cannot find the tessel-stage executable (tried $TESSEL_STAGE_BINARY" +
                      places + "): build it, or set TESSEL_STAGE_BINARY");
}

}  // namespace tessel::launcher
