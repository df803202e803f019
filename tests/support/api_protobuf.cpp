#include "tests/support/api_protobuf.h"

#include <cstdint>
#include <map>
#include <string_view>
#include <vector>

#include "tests/support/api_errors.h"

namespace tessel::testing {
namespace {

using json = nlohmann::json;

// One message type: its fields by number.
struct Message;
struct Field {
  enum class Type { kString, kInt, kBool, kMessage, kStringMap };
  std::string name;
  Type type = Type::kString;
  bool repeated = false;
  const Message* message = nullptr;  // kMessage
};
struct Message {
  std::map<int, Field> fields;
};

using T = Field::Type;

const Message& object_meta() {
  static const Message message{{{1, {"name"}},
                                {2, {"generateName"}},
                                {3, {"namespace"}},
                                {5, {"uid"}},
                                {6, {"resourceVersion"}},
                                {11, {"labels", T::kStringMap}},
                                {12, {"annotations", T::kStringMap}},
                                {14, {"finalizers", T::kString, true}}}};
  return message;
}

const Message& object_reference() {
  static const Message message{{{1, {"kind"}},
                                {2, {"namespace"}},
                                {3, {"name"}},
                                {4, {"uid"}},
                                {5, {"apiVersion"}},
                                {6, {"resourceVersion"}},
                                {7, {"fieldPath"}}}};
  return message;
}

const Message& service_account() {
  static const Message local_reference{{{1, {"name"}}}};
  static const Message message{{{1, {"metadata", T::kMessage, false, &object_meta()}},
                                {2, {"secrets", T::kMessage, true, &object_reference()}},
                                {3, {"imagePullSecrets", T::kMessage, true, &local_reference}},
                                {4, {"automountServiceAccountToken", T::kBool}}}};
  return message;
}

const Message& namespace_message() {
  static const Message spec{{{1, {"finalizers", T::kString, true}}}};
  static const Message message{{{1, {"metadata", T::kMessage, false, &object_meta()}},
                                {2, {"spec", T::kMessage, false, &spec}}}};
  return message;
}

const Message& policy_rule() {
  static const Message message{{{1, {"verbs", T::kString, true}},
                                {2, {"apiGroups", T::kString, true}},
                                {3, {"resources", T::kString, true}},
                                {4, {"resourceNames", T::kString, true}},
                                {5, {"nonResourceURLs", T::kString, true}}}};
  return message;
}

const Message& self_subject_rules_review() {
  static const Message spec{{{1, {"namespace"}}}};
  static const Message message{{{1, {"metadata", T::kMessage, false, &object_meta()}},
                                {2, {"spec", T::kMessage, false, &spec}}}};
  return message;
}

const Message& role() {
  static const Message message{{{1, {"metadata", T::kMessage, false, &object_meta()}},
                                {2, {"rules", T::kMessage, true, &policy_rule()}}}};
  return message;
}

const Message& role_binding() {
  static const Message subject{
      {{1, {"kind"}}, {2, {"apiGroup"}}, {3, {"name"}}, {4, {"namespace"}}}};
  static const Message role_ref{{{1, {"apiGroup"}}, {2, {"kind"}}, {3, {"name"}}}};
  static const Message message{{{1, {"metadata", T::kMessage, false, &object_meta()}},
                                {2, {"subjects", T::kMessage, true, &subject}},
                                {3, {"roleRef", T::kMessage, false, &role_ref}}}};
  return message;
}

const Message& token_request() {
  static const Message bound{{{1, {"kind"}}, {2, {"apiVersion"}}, {3, {"name"}}, {4, {"uid"}}}};
  static const Message spec{{{1, {"audiences", T::kString, true}},
                             {3, {"boundObjectRef", T::kMessage, false, &bound}},
                             {4, {"expirationSeconds", T::kInt}}}};
  static const Message message{{{1, {"metadata", T::kMessage, false, &object_meta()}},
                                {2, {"spec", T::kMessage, false, &spec}}}};
  return message;
}

const Message& self_subject_access_review() {
  static const Message resource{{{1, {"namespace"}},
                                 {2, {"verb"}},
                                 {3, {"group"}},
                                 {4, {"version"}},
                                 {5, {"resource"}},
                                 {6, {"subresource"}},
                                 {7, {"name"}}}};
  static const Message non_resource{{{1, {"path"}}, {2, {"verb"}}}};
  static const Message spec{{{1, {"resourceAttributes", T::kMessage, false, &resource}},
                             {2, {"nonResourceAttributes", T::kMessage, false, &non_resource}}}};
  static const Message message{{{1, {"metadata", T::kMessage, false, &object_meta()}},
                                {2, {"spec", T::kMessage, false, &spec}}}};
  return message;
}

// The protobuf wire format: varints, length-delimited fields, fixed 32/64-bit ones.
class Reader {
 public:
  explicit Reader(std::string_view bytes) : bytes_(bytes) {}
  bool done() const { return position_ >= bytes_.size(); }

  std::uint64_t varint() {
    std::uint64_t value = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      if (done()) throw bad_request("protobuf body: a varint runs past the end");
      const auto byte = static_cast<unsigned char>(bytes_[position_++]);
      value |= std::uint64_t{byte & 0x7Fu} << shift;
      if ((byte & 0x80u) == 0) return value;
    }
    throw bad_request("protobuf body: a varint is longer than 10 bytes");
  }

  std::string_view bytes() {
    const std::uint64_t length = varint();
    if (length > bytes_.size() - position_) {
      throw bad_request("protobuf body: a field of " + std::to_string(length) +
                        " bytes runs past the end");
    }
    const std::string_view out = bytes_.substr(position_, length);
    position_ += length;
    return out;
  }

  void skip(int wire_type) {
    switch (wire_type) {
      case 0:
        varint();
        return;
      case 1:
        advance(8);
        return;
      case 2:
        bytes();
        return;
      case 5:
        advance(4);
        return;
      default:
        throw bad_request("protobuf body: unsupported wire type " + std::to_string(wire_type));
    }
  }

 private:
  void advance(std::size_t count) {
    if (count > bytes_.size() - position_) throw bad_request("protobuf body: truncated");
    position_ += count;
  }

  std::string_view bytes_;
  std::size_t position_ = 0;
};

json decode(std::string_view bytes, const Message& message);

json decode_value(Reader& reader, int wire_type, const Field& field) {
  switch (field.type) {
    case T::kInt:
      if (wire_type != 0) break;
      return static_cast<std::int64_t>(reader.varint());
    case T::kBool:
      if (wire_type != 0) break;
      return reader.varint() != 0;
    case T::kString:
      if (wire_type != 2) break;
      return std::string(reader.bytes());
    case T::kMessage:
      if (wire_type != 2) break;
      return decode(reader.bytes(), *field.message);
    case T::kStringMap:
      break;
  }
  throw bad_request("protobuf body: field " + field.name + " has wire type " +
                    std::to_string(wire_type));
}

json decode(std::string_view bytes, const Message& message) {
  static const Message kMapEntry{{{1, {"key"}}, {2, {"value"}}}};
  json out = json::object();
  Reader reader(bytes);
  while (!reader.done()) {
    const std::uint64_t tag = reader.varint();
    const int number = static_cast<int>(tag >> 3);
    const int wire_type = static_cast<int>(tag & 7);
    const auto known = message.fields.find(number);
    if (known == message.fields.end()) {
      reader.skip(wire_type);
      continue;
    }
    const Field& field = known->second;
    if (field.type == T::kStringMap) {
      if (wire_type != 2) throw bad_request("protobuf body: map " + field.name + " malformed");
      const json entry = decode(reader.bytes(), kMapEntry);
      out[field.name][entry.value("key", "")] = entry.value("value", "");
    } else if (field.repeated) {
      out[field.name].push_back(decode_value(reader, wire_type, field));
    } else {
      out[field.name] = decode_value(reader, wire_type, field);
    }
  }
  return out;
}

}  // namespace

json decode_protobuf_body(const std::string& body) {
  static const std::string kMagic("k8s\0", 4);
  if (body.compare(0, kMagic.size(), kMagic) != 0) {
    throw bad_request("a protobuf body must start with the \"k8s\\x00\" magic");
  }
  static const Message type_meta{{{1, {"apiVersion"}}, {2, {"kind"}}}};
  static const Message unknown{
      {{1, {"typeMeta", T::kMessage, false, &type_meta}}, {2, {"raw"}}, {4, {"contentType"}}}};
  const json envelope = decode(std::string_view(body).substr(kMagic.size()), unknown);
  const json meta = envelope.value("typeMeta", json::object());
  const std::string api_version = meta.value("apiVersion", "");
  const std::string kind = meta.value("kind", "");
  static const std::vector<std::tuple<std::string, std::string, const Message& (*)()>> kinds = {
      {"v1", "Namespace", namespace_message},
      {"v1", "ServiceAccount", service_account},
      {"authentication.k8s.io/v1", "TokenRequest", token_request},
      {"rbac.authorization.k8s.io/v1", "Role", role},
      {"rbac.authorization.k8s.io/v1", "ClusterRole", role},
      {"rbac.authorization.k8s.io/v1", "RoleBinding", role_binding},
      {"rbac.authorization.k8s.io/v1", "ClusterRoleBinding", role_binding},
      {"authorization.k8s.io/v1", "SelfSubjectAccessReview", self_subject_access_review},
      {"authorization.k8s.io/v1", "SelfSubjectRulesReview", self_subject_rules_review}};
  for (const auto& [known_version, known_kind, message] : kinds) {
    if (known_version != api_version || known_kind != kind) continue;
    json object = decode(envelope.value("raw", ""), message());
    object["apiVersion"] = api_version;
    object["kind"] = kind;
    return object;
  }
  throw bad_request(
      "the API test server decodes protobuf bodies of v1 Namespace, ServiceAccount, "
      "authentication.k8s.io/v1 TokenRequest, rbac.authorization.k8s.io/v1 Role, ClusterRole, "
      "RoleBinding, ClusterRoleBinding and authorization.k8s.io/v1 SelfSubjectAccessReview, "
      "SelfSubjectRulesReview only, not " +
      api_version + " " + kind + ": send it as JSON");
}

}  // namespace tessel::testing
