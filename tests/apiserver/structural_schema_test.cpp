// The structural schema against the captured kube-apiserver 1.26 responses (422-invalid-schema,
// 422-status-invalid-enum, 400-strict-unknown-field, 201-create-*-unknown-field, ...) and
// against kube-apiserver's wording for every other keyword.
#include "tests/support/structural_schema.h"

#include <gtest/gtest.h>

#include <regex>
#include <stdexcept>
#include <string>
#include <vector>

#include "tests/kube/fixtures.h"
#include "tests/support/structural_schema_errors.h"

namespace tessel::testing {
namespace {

using nlohmann::json;

// The TrainingJob CRD's schema, as the server stored it.
json training_job_schema() {
  return kube::testing::fixture(
      "200-get-crd-established.json")["response"]["body"]["spec"]["versions"][0]["schema"]
                                     ["openAPIV3Schema"];
}

// What the server does to a request body before storing it: defaults, pruning, validation.
std::vector<FieldError> admit(const StructuralSchema& schema, json& object) {
  schema.apply_defaults(object);
  schema.prune(object);
  return schema.validate(object);
}

std::vector<FieldError> errors_for(const json& schema, json object) {
  return admit(StructuralSchema(schema), object);
}

json object_schema(const json& spec_properties) {
  return {{"type", "object"},
          {"properties", {{"spec", {{"type", "object"}, {"properties", spec_properties}}}}}};
}

std::vector<std::string> error_strings(const std::vector<FieldError>& errors) {
  std::vector<std::string> strings;
  for (const auto& error : errors) strings.push_back(field_error_string(error));
  return strings;
}

using Strings = std::vector<std::string>;

// ---- the captured responses ------------------------------------------------------------------

TEST(StructuralSchemaFixtureTest, InvalidSchemaReportsEveryViolationAsTheServerDid) {
  const json fixture = kube::testing::fixture("422-invalid-schema.json");
  json object = fixture["request"]["body"];
  const auto errors = errors_for(training_job_schema(), object);
  EXPECT_EQ(invalid_status("TrainingJob", "tessel.dev", "gpt-bad", errors),
            fixture["response"]["body"]);
}

TEST(StructuralSchemaFixtureTest, StatusEnumViolationThroughTheStatusSubresource) {
  const json fixture = kube::testing::fixture("422-status-invalid-enum.json");
  json object = kube::testing::fixture("200-get-trainingjob.json")["response"]["body"];
  object["status"] = fixture["request"]["body"]["status"];  // the merge patch's result
  const StructuralSchema schema(training_job_schema());
  EXPECT_EQ(invalid_status("TrainingJob", "tessel.dev", "gpt-a", schema.validate_status(object)),
            fixture["response"]["body"]);
  EXPECT_EQ(schema.validate_status(object), schema.validate(object));
}

TEST(StructuralSchemaFixtureTest, StrictDecodingNamesTheUnknownFieldsInOrder) {
  const json fixture = kube::testing::fixture("400-strict-unknown-field.json");
  json object = fixture["request"]["body"];
  const auto unknown = StructuralSchema(training_job_schema()).prune(object);
  std::string message =
      "TrainingJob in version \"v1alpha1\" cannot be handled as a TrainingJob: "
      "strict decoding error: ";
  for (std::size_t i = 0; i < unknown.size(); ++i) {
    message += (i > 0 ? ", " : "") + std::string("unknown field ") + go_quote(unknown[i]);
  }
  EXPECT_EQ(message, fixture["response"]["body"]["message"]);
}

void expect_pruned_like_fixture(const std::string& fixture_name) {
  SCOPED_TRACE(fixture_name);
  const json fixture = kube::testing::fixture(fixture_name);
  json object = fixture["request"]["body"];
  const StructuralSchema schema(training_job_schema());
  schema.apply_defaults(object);
  const auto unknown = schema.prune(object);
  EXPECT_TRUE(schema.validate(object).empty());
  json warnings = json::array();
  for (const auto& path : unknown) {
    warnings.push_back("299 - " + go_quote("unknown field " + go_quote(path)));
  }
  EXPECT_EQ(warnings, fixture["response"]["headers"]["Warning"]);
  const json& stored = fixture["response"]["body"];
  EXPECT_EQ(object["spec"], stored["spec"]);
  EXPECT_FALSE(object.contains("topLevelJunk"));
  EXPECT_EQ(object["metadata"], fixture["request"]["body"]["metadata"]);  // left to the core
  EXPECT_EQ(object["apiVersion"], stored["apiVersion"]);
  EXPECT_EQ(object["kind"], stored["kind"]);
}

TEST(StructuralSchemaFixtureTest, UnknownFieldsArePrunedWithOneWarningEach) {
  expect_pruned_like_fixture("201-create-pruned-unknown-field.json");
  expect_pruned_like_fixture("201-create-unknown-field-warn.json");
}

TEST(StructuralSchemaFixtureTest, CreateAppliesTheSchemaDefaults) {
  const json fixture = kube::testing::fixture("201-create-trainingjob.json");
  json object = fixture["request"]["body"];
  EXPECT_TRUE(admit(StructuralSchema(training_job_schema()), object).empty());
  EXPECT_EQ(object["spec"], fixture["response"]["body"]["spec"]);
}

TEST(StructuralSchemaFixtureTest, MemberClusterStatusKeepsUnknownFields) {
  const json crd = kube::testing::fixture("201-create-crd.json")["request"]["body"];
  const StructuralSchema schema(crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]);
  json object = {{"apiVersion", "tessel.dev/v1alpha1"},
                 {"kind", "MemberCluster"},
                 {"metadata", {{"name", "edge-eu"}}},
                 {"spec", {{"server", "https://edge"}, {"region", "eu"}}},
                 {"status", {{"anything", {{"goes", 1}}}}}};
  EXPECT_EQ(schema.prune(object), Strings{"spec.region"});
  EXPECT_EQ(object["status"], (json{{"anything", {{"goes", 1}}}}));
}

TEST(InvalidStatusTest, ReproducesTheCapturedInvalidResponses) {
  {
    const json fixture = kube::testing::fixture("422-add-finalizer-while-terminating.json");
    const auto error = field_forbidden(
        "metadata.finalizers",
        "no new finalizers can be added if the object is being deleted, found new finalizers "
        "[]string{\"tessel.dev/other\"}");
    EXPECT_EQ(invalid_status("TrainingJob", "tessel.dev", "gpt-f", {error, error}),
              fixture["response"]["body"]);
  }
  {
    const json fixture = kube::testing::fixture("422-ssa-missing-fieldmanager.json");
    EXPECT_EQ(invalid_status("PatchOptions", "meta.k8s.io", "",
                             {field_required("fieldManager", "is required for apply patch")}),
              fixture["response"]["body"]);
  }
  {
    const json fixture = kube::testing::fixture("422-update-without-resourceversion.json");
    const FieldError error{"FieldValueInvalid", "metadata.resourceVersion",
                           "Invalid value: 0x0: must be specified for an update"};
    EXPECT_EQ(invalid_status("trainingjobs", "tessel.dev", "gpt-a", {error}),
              fixture["response"]["body"]);
  }
}

// ---- types -------------------------------------------------------------------------------------

TEST(StructuralSchemaTypeTest, WrongTypesAreNamedAsKubeOpenApiNamesThem) {
  const json schema = object_schema({{"s", {{"type", "string"}}},
                                     {"i", {{"type", "integer"}}},
                                     {"n", {{"type", "number"}}},
                                     {"b", {{"type", "boolean"}}},
                                     {"a", {{"type", "array"}, {"items", {{"type", "string"}}}}},
                                     {"o", {{"type", "object"}}}});
  EXPECT_EQ(
      error_strings(errors_for(schema, {{"spec",
                                         {{"s", 1},
                                          {"i", "1"},
                                          {"n", true},
                                          {"b", "true"},
                                          {"a", {{"x", 1}}},
                                          {"o", json::array({1})}}}})),
      (Strings{
          R"(spec.a: Invalid value: "object": spec.a in body must be of type array: "object")",
          R"(spec.b: Invalid value: "string": spec.b in body must be of type boolean: "string")",
          R"(spec.i: Invalid value: "string": spec.i in body must be of type integer: "string")",
          R"(spec.n: Invalid value: "boolean": spec.n in body must be of type number: "boolean")",
          R"(spec.o: Invalid value: "array": spec.o in body must be of type object: "array")",
          R"(spec.s: Invalid value: "integer": spec.s in body must be of type string: "integer")",
      }));
  EXPECT_EQ(errors_for(schema, {{"spec", {{"s", 1}}}}).front().type, "FieldValueTypeInvalid");
}

TEST(StructuralSchemaTypeTest, IntegersAreNumbersAndWholeFloatsAreIntegers) {
  const json schema = object_schema({{"i", {{"type", "integer"}}}, {"n", {{"type", "number"}}}});
  EXPECT_TRUE(errors_for(schema, {{"spec", {{"i", 3.0}, {"n", 3}}}}).empty());
  EXPECT_EQ(
      error_strings(errors_for(schema, {{"spec", {{"i", 3.5}}}})),
      (Strings{
          R"(spec.i: Invalid value: "number": spec.i in body must be of type integer: "number")"}));
}

TEST(StructuralSchemaTypeTest, IntOrStringTakesBothAndNothingElse) {
  const json schema = object_schema({{"port",
                                      {{"x-kubernetes-int-or-string", true},
                                       {"anyOf", {{{"type", "integer"}}, {{"type", "string"}}}}}}});
  EXPECT_TRUE(errors_for(schema, {{"spec", {{"port", 80}}}}).empty());
  EXPECT_TRUE(errors_for(schema, {{"spec", {{"port", "http"}}}}).empty());
  EXPECT_EQ(
      error_strings(errors_for(schema, {{"spec", {{"port", 1.5}}}})),
      (Strings{
          R"(spec.port: Invalid value: "number": spec.port in body must be of type integer,string: "number")"}));
}

TEST(StructuralSchemaTypeTest, NullIsAcceptedOnlyWhereNullable) {
  const json schema = object_schema(
      {{"optional", {{"type", "string"}, {"nullable", true}}}, {"plain", {{"type", "string"}}}});
  json object = {{"spec", {{"optional", nullptr}, {"plain", nullptr}}}};
  const StructuralSchema structural(schema);
  // Without pruning the null is a type error...
  EXPECT_EQ(
      error_strings(structural.validate(object)),
      (Strings{
          R"(spec.plain: Invalid value: "null": spec.plain in body must be of type string: "null")"}));
  // ...but the server drops non-nullable nulls without a default before validating.
  EXPECT_TRUE(structural.prune(object).empty());
  EXPECT_EQ(object["spec"], (json{{"optional", nullptr}}));
  EXPECT_TRUE(structural.validate(object).empty());
}

// ---- required, enum, numbers, strings, arrays, objects ------------------------------------------

TEST(StructuralSchemaKeywordTest, RequiredFieldsAreReportedAfterTheProperties) {
  const json schema = {{"type", "object"},
                       {"required", {"spec"}},
                       {"properties",
                        {{"spec",
                          {{"type", "object"},
                           {"required", {"b", "a"}},
                           {"properties",
                            {{"a", {{"type", "string"}}},
                             {"b", {{"type", "string"}}},
                             {"c", {{"type", "string"}}}}}}}}}};
  EXPECT_EQ(error_strings(errors_for(schema, json::object())), (Strings{"spec: Required value"}));
  EXPECT_EQ(
      error_strings(errors_for(schema, {{"spec", {{"c", 1}}}})),
      (Strings{
          R"(spec.c: Invalid value: "integer": spec.c in body must be of type string: "integer")",
          "spec.b: Required value", "spec.a: Required value"}));
}

TEST(StructuralSchemaKeywordTest, EnumListsTheSupportedValues) {
  const json schema = object_schema({{"level", {{"type", "integer"}, {"enum", {1, 2, 3}}}},
                                     {"mode", {{"type", "string"}, {"enum", {"A", "B"}}}}});
  EXPECT_TRUE(errors_for(schema, {{"spec", {{"level", 2}, {"mode", "B"}}}}).empty());
  const auto errors = errors_for(schema, {{"spec", {{"level", 7}, {"mode", "C"}}}});
  EXPECT_EQ(error_strings(errors),
            (Strings{R"(spec.level: Unsupported value: 7: supported values: "1", "2", "3")",
                     R"(spec.mode: Unsupported value: "C": supported values: "A", "B")"}));
  EXPECT_EQ(errors.front().type, "FieldValueNotSupported");
  // A wrong type fails the type check and the enum.
  EXPECT_EQ(
      error_strings(errors_for(schema, {{"spec", {{"mode", 5}}}})),
      (Strings{
          R"(spec.mode: Invalid value: "integer": spec.mode in body must be of type string: "integer")",
          R"(spec.mode: Unsupported value: 5: supported values: "A", "B")"}));
}

TEST(StructuralSchemaKeywordTest, NumericBoundsAndMultiples) {
  const json schema = object_schema(
      {{"i", {{"type", "integer"}, {"minimum", 1}, {"maximum", 10}, {"multipleOf", 2}}},
       {"x",
        {{"type", "number"},
         {"minimum", 0.5},
         {"exclusiveMinimum", true},
         {"maximum", 2.5},
         {"exclusiveMaximum", true}}}});
  EXPECT_TRUE(errors_for(schema, {{"spec", {{"i", 4}, {"x", 1.0}}}}).empty());
  EXPECT_EQ(error_strings(errors_for(schema, {{"spec", {{"i", 11}, {"x", 0.5}}}})),
            (Strings{"spec.i: Invalid value: 11: spec.i in body should be a multiple of 2",
                     "spec.i: Invalid value: 11: spec.i in body should be less than or equal to 10",
                     "spec.x: Invalid value: 0.5: spec.x in body should be greater than 0.5"}));
  EXPECT_EQ(
      error_strings(errors_for(schema, {{"spec", {{"i", 0}, {"x", 2.5}}}})),
      (Strings{"spec.i: Invalid value: 0: spec.i in body should be greater than or equal to 1",
               "spec.x: Invalid value: 2.5: spec.x in body should be less than 2.5"}));
}

TEST(StructuralSchemaKeywordTest, StringLengthsAndPatterns) {
  const json schema = object_schema(
      {{"name",
        {{"type", "string"}, {"minLength", 2}, {"maxLength", 5}, {"pattern", "^[a-z]+$"}}}});
  EXPECT_TRUE(errors_for(schema, {{"spec", {{"name", "abc"}}}}).empty());
  const auto too_long = errors_for(schema, {{"spec", {{"name", "abcdefg"}}}});
  EXPECT_EQ(error_strings(too_long), (Strings{"spec.name: Too long: may not be longer than 5"}));
  EXPECT_EQ(too_long.front().type, "FieldValueTooLong");
  EXPECT_EQ(
      error_strings(errors_for(schema, {{"spec", {{"name", "a"}}}})),
      (Strings{
          R"(spec.name: Invalid value: "a": spec.name in body should be at least 2 chars long)"}));
  EXPECT_EQ(
      error_strings(errors_for(schema, {{"spec", {{"name", "AB"}}}})),
      (Strings{R"(spec.name: Invalid value: "AB": spec.name in body should match '^[a-z]+$')"}));
  // Lengths count characters, not bytes.
  EXPECT_TRUE(errors_for(object_schema({{"name", {{"type", "string"}, {"maxLength", 2}}}}),
                         {{"spec", {{"name", "\xC3\xA9\xC3\xA9"}}}})
                  .empty());
}

TEST(StructuralSchemaKeywordTest, FormatsAreCheckedAndUnsupportedOnesIgnored) {
  const json schema = object_schema({{"at", {{"type", "string"}, {"format", "date-time"}}},
                                     {"id", {{"type", "string"}, {"format", "uuid"}}},
                                     {"ip", {{"type", "string"}, {"format", "ipv4"}}},
                                     {"n", {{"type", "integer"}, {"format", "int32"}}}});
  EXPECT_TRUE(errors_for(schema, {{"spec",
                                   {{"at", "2026-11-21T23:01:17Z"},
                                    {"id", "9cb914b6-62d7-49e5-81a5-6df8560286df"},
                                    {"ip", "10.0.0.11"},
                                    {"n", 9999999999}}}})  // int32 is not range-checked
                  .empty());
  const auto errors =
      errors_for(schema, {{"spec", {{"at", "yesterday"}, {"id", "nope"}, {"ip", "10.0.0.256"}}}});
  EXPECT_EQ(
      error_strings(errors),
      (Strings{
          R"(spec.at: Invalid value: "yesterday": spec.at in body must be of type date-time: "yesterday")",
          R"(spec.id: Invalid value: "nope": spec.id in body must be of type uuid: "nope")",
          R"(spec.ip: Invalid value: "10.0.0.256": spec.ip in body must be of type ipv4: "10.0.0.256")"}));
  EXPECT_EQ(errors.front().type, "FieldValueTypeInvalid");
}

TEST(StructuralSchemaKeywordTest, ArraySizesAndNestedItems) {
  const json schema = object_schema(
      {{"matrix",
        {{"type", "array"},
         {"minItems", 1},
         {"maxItems", 2},
         {"items", {{"type", "array"}, {"items", {{"type", "integer"}, {"minimum", 0}}}}}}}});
  EXPECT_TRUE(errors_for(schema, {{"spec", {{"matrix", {{1, 2}, {3}}}}}}).empty());
  const auto errors = errors_for(schema, {{"spec", {{"matrix", {{1}, {2, -1}, {3}}}}}});
  EXPECT_EQ(error_strings(errors),
            (Strings{"spec.matrix[1][1]: Invalid value: -1: spec.matrix[1][1] in body should be "
                     "greater than or equal to 0",
                     "spec.matrix: Too many: 3: must have at most 2 items"}));
  EXPECT_EQ(errors.back().type, "FieldValueTooMany");
  EXPECT_EQ(
      error_strings(errors_for(schema, {{"spec", {{"matrix", json::array()}}}})),
      (Strings{"spec.matrix: Invalid value: 0: spec.matrix in body should have at least 1 items"}));
}

TEST(StructuralSchemaKeywordTest, ObjectPropertyCountsAndAdditionalProperties) {
  const json schema =
      object_schema({{"limits",
                      {{"type", "object"},
                       {"maxProperties", 2},
                       {"additionalProperties", {{"type", "integer"}, {"minimum", 0}}}}}});
  EXPECT_TRUE(errors_for(schema, {{"spec", {{"limits", {{"gpu", 8}}}}}}).empty());
  EXPECT_EQ(
      error_strings(errors_for(schema, {{"spec", {{"limits", {{"gpu", -1}, {"cpu", "x"}}}}}})),
      (Strings{
          R"(spec.limits.cpu: Invalid value: "string": spec.limits.cpu in body must be of type integer: "string")",
          "spec.limits.gpu: Invalid value: -1: spec.limits.gpu in body should be "
          "greater than or equal to 0"}));
  EXPECT_EQ(
      error_strings(errors_for(schema, {{"spec", {{"limits", {{"a", 1}, {"b", 2}, {"c", 3}}}}}})),
      (Strings{"spec.limits: Too many: 3: must have at most 2 items"}));
}

TEST(StructuralSchemaKeywordTest, ListTypeSetAndMapRejectDuplicates) {
  const json schema = object_schema(
      {{"tags",
        {{"type", "array"}, {"x-kubernetes-list-type", "set"}, {"items", {{"type", "string"}}}}},
       {"ports",
        {{"type", "array"},
         {"x-kubernetes-list-type", "map"},
         {"x-kubernetes-list-map-keys", {"name"}},
         {"items",
          {{"type", "object"},
           {"required", {"name"}},
           {"properties", {{"name", {{"type", "string"}}}, {"port", {{"type", "integer"}}}}}}}}}});
  EXPECT_TRUE(
      errors_for(schema,
                 {{"spec",
                   {{"tags", {"a", "b"}},
                    {"ports", {{{"name", "x"}, {"port", 1}}, {{"name", "y"}, {"port", 1}}}}}}})
          .empty());
  const auto errors = errors_for(
      schema, {{"spec",
                {{"tags", {"a", "b", "a", "a"}},
                 {"ports", {{{"name", "x"}, {"port", 1}}, {{"name", "x"}, {"port", 2}}}}}}});
  EXPECT_EQ(error_strings(errors),
            (Strings{R"(spec.ports[1]: Duplicate value: map[string]interface {}{"name":"x"})",
                     R"(spec.tags[2]: Duplicate value: "a")"}));
  EXPECT_EQ(errors.front().type, "FieldValueDuplicate");
}

// ---- pruning and defaulting --------------------------------------------------------------------

TEST(StructuralSchemaPruningTest, PreserveUnknownFieldsKeepsUnknownsButPrunesKnownSubtrees) {
  const json schema = object_schema(
      {{"config",
        {{"type", "object"},
         {"x-kubernetes-preserve-unknown-fields", true},
         {"properties",
          {{"known", {{"type", "object"}, {"properties", {{"a", {{"type", "string"}}}}}}}}}}},
       {"list",
        {{"type", "array"},
         {"items", {{"type", "object"}, {"properties", {{"a", {{"type", "string"}}}}}}}}}});
  json object = {{"spec",
                  {{"config", {{"free", {{"x", 1}}}, {"known", {{"a", "1"}, {"b", 2}}}}},
                   {"list", {{{"a", "1"}, {"junk", true}}}},
                   {"extra", 1}}}};
  EXPECT_EQ(StructuralSchema(schema).prune(object),
            (Strings{"spec.config.known.b", "spec.extra", "spec.list[0].junk"}));
  EXPECT_EQ(object["spec"]["config"], (json{{"free", {{"x", 1}}}, {"known", {{"a", "1"}}}}));
  EXPECT_EQ(object["spec"]["list"], (json{{{"a", "1"}}}));
}

TEST(StructuralSchemaPruningTest, EmbeddedResourcesKeepTheirTypeAndObjectMeta) {
  const json schema = object_schema({{"template",
                                      {{"type", "object"},
                                       {"x-kubernetes-embedded-resource", true},
                                       {"properties", {{"spec", {{"type", "object"}}}}}}}});
  json object = {{"spec",
                  {{"template",
                    {{"apiVersion", "v1"},
                     {"kind", "Pod"},
                     {"metadata", {{"name", "p"}}},
                     {"spec", json::object()},
                     {"status", json::object()}}}}}};
  EXPECT_EQ(StructuralSchema(schema).prune(object), (Strings{"spec.template.status"}));
  EXPECT_EQ(object["spec"]["template"]["metadata"], (json{{"name", "p"}}));
}

TEST(StructuralSchemaPruningTest, RootApiVersionKindAndMetadataAreNeverTouched) {
  const json schema = {{"type", "object"}, {"properties", {{"metadata", {{"type", "object"}}}}}};
  json object = {{"apiVersion", 1},
                 {"kind", "X"},
                 {"metadata", {{"name", "a"}, {"odd", nullptr}}},
                 {"other", 2}};
  EXPECT_EQ(StructuralSchema(schema).prune(object), (Strings{"other"}));
  EXPECT_EQ(
      object,
      (json{{"apiVersion", 1}, {"kind", "X"}, {"metadata", {{"name", "a"}, {"odd", nullptr}}}}));
}

TEST(StructuralSchemaDefaultingTest, DefaultsFillAbsentFieldsEverywhereButNeverOverwrite) {
  const json schema = object_schema(
      {{"mode", {{"type", "string"}, {"default", "fast"}}},
       {"nested",
        {{"type", "object"},
         {"default", json::object()},
         {"properties", {{"depth", {{"type", "integer"}, {"default", 3}}}}}}},
       {"workers",
        {{"type", "array"},
         {"items",
          {{"type", "object"}, {"properties", {{"cpu", {{"type", "integer"}, {"default", 1}}}}}}}}},
       {"pools",
        {{"type", "object"},
         {"additionalProperties",
          {{"type", "object"},
           {"properties", {{"size", {{"type", "integer"}, {"default", 2}}}}}}}}},
       {"ratio", {{"type", "number"}, {"default", 0.5}}}});
  json object = {{"spec",
                  {{"mode", "slow"},
                   {"workers", {json::object(), {{"cpu", 4}}}},
                   {"pools", {{"a", json::object()}, {"b", {{"size", 9}}}}},
                   {"ratio", nullptr}}}};
  StructuralSchema(schema).apply_defaults(object);
  EXPECT_EQ(object["spec"], (json{{"mode", "slow"},
                                  {"nested", {{"depth", 3}}},
                                  {"workers", {{{"cpu", 1}}, {{"cpu", 4}}}},
                                  {"pools", {{"a", {{"size", 2}}}, {"b", {{"size", 9}}}}},
                                  {"ratio", 0.5}}));
}

// ---- schemas the server would not accept ------------------------------------------------------

void expect_rejected(const json& schema, const std::string& message) {
  try {
    StructuralSchema structural(schema);
    ADD_FAILURE() << "accepted: " << schema.dump();
  } catch (const std::invalid_argument& error) {
    EXPECT_EQ(error.what(), message);
  }
}

TEST(StructuralSchemaConstructionTest, NonStructuralSchemasAreRejectedNamingThePath) {
  expect_rejected({{"type", "string"}},
                  R"(openAPIV3Schema.type: Invalid value: "string": must be object at the root)");
  expect_rejected(object_schema({{"x", {{"description", "no type"}}}}),
                  "openAPIV3Schema.properties[spec].properties[x].type: Required value: must not "
                  "be empty for specified object fields");
  expect_rejected(object_schema({{"x", {{"type", "array"}}}}),
                  "openAPIV3Schema.properties[spec].properties[x].items: Required value: must be "
                  "specified");
  expect_rejected(
      object_schema(
          {{"x", {{"type", "array"}, {"uniqueItems", true}, {"items", {{"type", "string"}}}}}}),
      "openAPIV3Schema.properties[spec].properties[x].uniqueItems: Forbidden: "
      "uniqueItems cannot be set to true since the runtime complexity becomes "
      "quadratic");
  expect_rejected(object_schema({{"x", {{"type", "string"}, {"pattern", "(unclosed"}}}}),
                  std::string("openAPIV3Schema.properties[spec].properties[x].pattern: Invalid "
                              "value: \"(unclosed\": must be a valid regular expression, but "
                              "isn't: ") +
                      std::regex_error(std::regex_constants::error_paren).what());
  expect_rejected(
      object_schema({{"x", {{"type", "string"}, {"x-kubernetes-validations", json::array()}}}}),
      "openAPIV3Schema.properties[spec].properties[x].x-kubernetes-validations: "
      "Forbidden: validation rules (CEL) are not supported by the test server");
  expect_rejected(object_schema({{"x",
                                  {{"type", "object"},
                                   {"properties", {{"a", {{"type", "string"}}}}},
                                   {"additionalProperties", {{"type", "string"}}}}}}),
                  "openAPIV3Schema.properties[spec].properties[x].additionalProperties: "
                  "Forbidden: additionalProperties and properties are mutual exclusive");
  expect_rejected(object_schema({{"x", {{"type", "string"}, {"maxLenght", 3}}}}),
                  "openAPIV3Schema.properties[spec].properties[x].maxLenght: Forbidden: unknown "
                  "schema keyword");
  expect_rejected(object_schema({{"x",
                                  {{"type", "array"},
                                   {"x-kubernetes-list-type", "map"},
                                   {"items", {{"type", "object"}}}}}}),
                  "openAPIV3Schema.properties[spec].properties[x].x-kubernetes-list-map-keys: "
                  "Required value: must not be empty if x-kubernetes-list-type is map");
}

// ---- Go formatting ----------------------------------------------------------------------------

TEST(GoFormattingTest, FloatsQuotesAndCompositeValuesPrintAsGoPrintsThem) {
  EXPECT_EQ(go_float_text(1), "1");
  EXPECT_EQ(go_float_text(0.5), "0.5");
  EXPECT_EQ(go_float_text(123456), "123456");
  EXPECT_EQ(go_float_text(1e6), "1e+06");
  EXPECT_EQ(go_float_text(0.0001), "0.0001");
  EXPECT_EQ(go_float_text(0.00001), "1e-05");
  EXPECT_EQ(go_quote("a\"b\\c\n\x01\xC3\xA9"), "\"a\\\"b\\\\c\\n\\x01\xC3\xA9\"");
  EXPECT_EQ(go_value_text(json{{"b", {1, "x"}}, {"a", nullptr}}),
            R"(map[string]interface {}{"a":interface {}(nil), "b":[]interface {}{1, "x"}})");
}

}  // namespace
}  // namespace tessel::testing
