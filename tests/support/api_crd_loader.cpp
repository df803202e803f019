#include "tests/support/api_crd_loader.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>

#include "tests/support/api_errors.h"
#include "tests/support/api_yaml.h"

namespace tessel::testing {

void load_crds(const std::string& directory, ApiVerbs& verbs, const ServedResources& resources) {
  namespace fs = std::filesystem;
  std::error_code error;
  if (!fs::is_directory(directory, error)) {
    throw std::invalid_argument("CRD directory " + directory + " is not a readable directory");
  }
  std::vector<fs::path> files;
  for (const fs::directory_entry& entry : fs::directory_iterator(directory)) {
    const std::string extension = entry.path().extension().string();
    if (entry.is_regular_file() &&
        (extension == ".yaml" || extension == ".yml" || extension == ".json")) {
      files.push_back(entry.path());
    }
  }
  std::sort(files.begin(), files.end());
  const auto type = resources.find("apiextensions.k8s.io", "v1", "customresourcedefinitions");
  for (const fs::path& file : files) {
    std::ifstream in(file);
    std::stringstream text;
    text << in.rdbuf();
    if (!in) throw std::invalid_argument("cannot read CRD file " + file.string());
    std::vector<nlohmann::json> documents;
    try {
      documents = parse_yaml_documents(text.str());
    } catch (const std::invalid_argument& parse_error) {
      throw std::invalid_argument(file.string() + ": not YAML: " + parse_error.what());
    }
    for (std::size_t i = 0; i < documents.size(); ++i) {
      const std::string where = file.string() + " (document " + std::to_string(i + 1) + ")";
      const nlohmann::json& document = documents[i];
      if (!document.is_object() || document.value("kind", "") != "CustomResourceDefinition") {
        throw std::invalid_argument(where + ": not a CustomResourceDefinition");
      }
      try {
        verbs.create({type, "", "", ""}, document, {false, "tessel-test-apiserver", "Strict"});
      } catch (const ApiError& api_error) {
        throw std::invalid_argument(where + ": " + api_error.what());
      }
    }
  }
}

}  // namespace tessel::testing
