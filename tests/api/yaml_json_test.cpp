// yaml_to_json: YAML 1.2 core-schema scalars, and hostile documents refused with their place.
#include "api/yaml_json.h"

#include <gtest/gtest.h>

#include <string>

#include "api/manifest_error.h"

namespace tessel::api {
namespace {

using nlohmann::json;

std::string error_of(const std::string& text) {
  try {
    yaml_to_json(text, "job.yaml");
  } catch (const ManifestError& e) {
    return e.what();
  }
  return "(accepted)";
}

TEST(YamlJson, PlainScalarsFollowTheCoreSchema) {
  const json j = yaml_to_json(
      "a: 12\nb: -3\nc: 0.5\nd: 1e3\ne: true\nf: false\ng: ~\nh:\ni: hello\nj: '12'\nk: \"true\"\n"
      "l: [1, x]\nm: {n: 2}\no: yes\np: 99999999999999999999\n",
      "t");
  EXPECT_EQ(j["a"], 12);
  EXPECT_TRUE(j["a"].is_number_integer());
  EXPECT_EQ(j["b"], -3);
  EXPECT_EQ(j["c"], 0.5);
  EXPECT_EQ(j["d"], 1000.0);
  EXPECT_TRUE(j["d"].is_number_float());
  EXPECT_EQ(j["e"], true);
  EXPECT_EQ(j["f"], false);
  EXPECT_TRUE(j["g"].is_null());
  EXPECT_TRUE(j["h"].is_null());
  EXPECT_EQ(j["i"], "hello");
  EXPECT_EQ(j["j"], "12");
  EXPECT_EQ(j["k"], "true");
  EXPECT_EQ(j["l"], json::array({1, "x"}));
  EXPECT_EQ(j["m"]["n"], 2);
  EXPECT_EQ(j["o"], "yes");  // YAML 1.2: only true/false are booleans
  EXPECT_TRUE(j["p"].is_number_float());
}

TEST(YamlJson, HostileDocumentsAreRefusedWithTheirPlace) {
  EXPECT_EQ(error_of("a: .inf\n"), "job.yaml: line 1, column 4: '.inf' is not a finite number");
  EXPECT_EQ(error_of("a: .nan\n"), "job.yaml: line 1, column 4: '.nan' is not a finite number");
  EXPECT_EQ(error_of("a: 1e999\n"), "job.yaml: line 1, column 4: '1e999' is beyond any number");
  EXPECT_EQ(error_of("a: 1\na: 2\n"), "job.yaml: line 2, column 1: duplicate key 'a'");
  EXPECT_EQ(error_of("a: [1, 2\n"), "job.yaml: line 2, column 1: end of sequence flow not found");
  EXPECT_EQ(error_of("a: 1\n---\nb: 2\n"), "job.yaml: expected one YAML document, found 2");
  EXPECT_EQ(error_of("? [1, 2]\n: x\n"), "job.yaml: line 1, column 3: a key must be a string");
  std::string deep;
  for (int i = 0; i < 100; ++i) deep = "[" + deep + "]";
  EXPECT_NE(error_of("a: " + deep).find("nested deeper than 64"), std::string::npos);
}

// Found by tests/fuzz (trainingjob, job_file): yaml-cpp's LoadAll never returned on a ',' that
// starts no node (regressions/*/stray-comma-yaml-loadall-hang).
TEST(YamlJson, AStrayCommaIsRefusedWithItsPlace) {
  EXPECT_EQ(error_of(","),
            "job.yaml: line 1, column 1: unexpected ',' (no YAML node starts with it)");
  EXPECT_EQ(error_of("# A TrainingJob:\n,"),
            "job.yaml: line 2, column 1: unexpected ',' (no YAML node starts with it)");
  EXPECT_EQ(error_of("a: 1\n---\n,x"),
            "job.yaml: line 3, column 1: unexpected ',' (no YAML node starts with it)");
  EXPECT_EQ(error_of("a: 1\n---\nb: 2\n---\nc: 3\n"),
            "job.yaml: expected one YAML document, found 3");
  EXPECT_EQ(error_of(""), "job.yaml: expected one YAML document, found 0");
}

// Found by tests/fuzz (trainingjob): a name that is not UTF-8 reached an error message that
// nlohmann::json could not write (regressions/trainingjob/metadata-name-not-utf8).
TEST(YamlJson, TextThatIsNotUtf8IsRefusedNamingTheByte) {
  EXPECT_EQ(error_of("kind: Training\x8aJob\n"),
            "job.yaml: line 1, column 15: byte 0x8a is not UTF-8 (YAML and JSON text is UTF-8)");
  EXPECT_EQ(error_of("a: 1\nname: \"fab\xff\"\n"),
            "job.yaml: line 2, column 11: byte 0xff is not UTF-8 (YAML and JSON text is UTF-8)");
  EXPECT_NE(error_of("a: \xc0\xaf\n").find("byte 0xc0 is not UTF-8"),
            std::string::npos);  // overlong
  EXPECT_NE(error_of("a: \xed\xa0\x80\n").find("byte 0xed is not UTF-8"),
            std::string::npos);  // surrogate
  EXPECT_NE(error_of("a: \xe2\x82").find("byte 0xe2 is not UTF-8"), std::string::npos);  // cut
  // UTF-8 in that yaml-cpp reads into a string that is not (regressions/trainingjob/nul-in-kind).
  static constexpr char kNul[] = "\nkind: m\0\t\0fa\0\t\0N4YAML9ExceptionEfa";
  const std::string nul(kNul, sizeof kNul - 1);
  EXPECT_NE(error_of(nul).find("a value that is not UTF-8 once read"), std::string::npos)
      << error_of(nul);
  const std::string text =
      "gr\xc3\xbc\xc3\x9f"
      "e \xe2\x82\xac \xf0\x9f\x9a\x80";  // 2, 3, 4 bytes
  EXPECT_EQ(yaml_to_json("a: \"" + text + "\"\n", "t")["a"], text);
}

TEST(YamlJson, AliasBombsAreBounded) {
  std::string bomb = "a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n";
  for (int i = 1; i < 9; ++i) {
    bomb += "a" + std::to_string(i) + ": &a" + std::to_string(i) + " [";
    for (int k = 0; k < 10; ++k) bomb += std::string(k ? ", " : "") + "*a" + std::to_string(i - 1);
    bomb += "]\n";
  }
  EXPECT_NE(error_of(bomb).find("more than 100000 values (aliases expanded)"), std::string::npos);
}

}  // namespace
}  // namespace tessel::api
