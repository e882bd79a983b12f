#include "results/verdict/schema.h"

#include <algorithm>
#include <memory>
#include <mutex>
#include <valijson/adapters/nlohmann_json_adapter.hpp>
#include <valijson/schema.hpp>
#include <valijson/schema_parser.hpp>
#include <valijson/validator.hpp>

#include "results/verdict/ordering.h"

namespace ncclsmoke::results {

const char* verdict_schema_source();  // generated from verdict.schema.json (verdict_schema_text.cpp)

namespace {

using nlohmann::json;

struct Compiled {
  json doc;
  valijson::Schema schema;
};

const Compiled& compiled() {
  static const std::unique_ptr<Compiled> c = [] {
    auto p = std::make_unique<Compiled>();
    p->doc = json::parse(verdict_schema_text());
    valijson::SchemaParser parser(valijson::SchemaParser::kDraft7);
    valijson::adapters::NlohmannJsonAdapter adapter(p->doc);
    parser.populateSchema(adapter, p->schema);
    return p;
  }();
  return *c;
}

// valijson context ["<root>", "[findings]", "[0]", "[severity]"] -> tokens findings, 0, severity.
std::vector<std::string> tokens_of(const std::vector<std::string>& context) {
  std::vector<std::string> out;
  for (const auto& c : context) {
    if (c.size() >= 2 && c.front() == '[' && c.back() == ']') out.push_back(c.substr(1, c.size() - 2));
  }
  return out;
}

std::string pointer_of(const std::vector<std::string>& tokens) {
  if (tokens.empty()) return "/";
  std::string p;
  for (const auto& t : tokens) {
    p += '/';
    for (char ch : t) {
      if (ch == '~') p += "~0";
      else if (ch == '/') p += "~1";
      else p += ch;
    }
  }
  return p;
}

const json* value_at(const json& doc, const std::vector<std::string>& tokens) {
  const json* cur = &doc;
  for (const auto& t : tokens) {
    if (cur->is_object()) {
      auto it = cur->find(t);
      if (it == cur->end()) return nullptr;
      cur = &*it;
    } else if (cur->is_array()) {
      size_t i = 0;
      try {
        i = std::stoul(t);
      } catch (...) {
        return nullptr;
      }
      if (i >= cur->size()) return nullptr;
      cur = &(*cur)[i];
    } else {
      return nullptr;
    }
  }
  return cur;
}

const json* resolve(const json& root, const json* s) {
  for (int guard = 0; s && s->is_object() && s->contains("$ref") && guard < 8; ++guard) {
    std::string ref = s->at("$ref").get<std::string>();
    if (ref.rfind("#", 0) != 0) return nullptr;
    try {
      s = &root.at(json::json_pointer(ref.substr(1)));
    } catch (...) {
      return nullptr;
    }
  }
  return s;
}

// The subschema that describes the value at `tokens` (following properties / items /
// additionalProperties / $ref only: enough for this schema's plain structure).
const json* schema_at(const json& root, const std::vector<std::string>& tokens) {
  const json* s = resolve(root, &root);
  for (const auto& t : tokens) {
    if (!s || !s->is_object()) return nullptr;
    if (s->contains("properties") && s->at("properties").contains(t)) {
      s = &s->at("properties").at(t);
    } else if (s->contains("items")) {
      s = &s->at("items");
    } else if (s->contains("additionalProperties") && s->at("additionalProperties").is_object()) {
      s = &s->at("additionalProperties");
    } else {
      return nullptr;
    }
    s = resolve(root, s);
  }
  return s;
}

std::string list_of(const json& values) {
  std::string out;
  for (const auto& v : values) out += (out.empty() ? "" : ", ") + v.dump();
  return out;
}

std::string type_of(const json& v) {
  if (v.is_number_integer()) return "integer";
  if (v.is_number()) return "number";
  return v.type_name();
}

std::string shorten(std::string s) {
  return s.size() > 80 ? s.substr(0, 77) + "..." : s;
}

bool is_wrapper(const std::string& d) {
  static const char* prefixes[] = {
      "Failed to validate item #",
      "Failed to validate against schema associated with property name",
      "Failed to validate against a conditional schema",
      "Failed to validate against additional properties schema",
      "Failed to validate against child schema #",
  };
  for (const char* p : prefixes) {
    if (d.rfind(p, 0) == 0) return true;
  }
  return false;
}

std::string describe(const json& doc, const json& schema_root, const std::vector<std::string>& tokens,
                     const std::string& description) {
  const json* value = value_at(doc, tokens);
  const json* sub = schema_at(schema_root, tokens);
  std::string got = value ? shorten(value->dump()) : std::string("nothing");
  if (description.rfind("Failed to match against any enum values", 0) == 0 && sub &&
      sub->contains("enum")) {
    return got + " is not one of " + list_of(sub->at("enum"));
  }
  if (description.rfind("Value type not permitted", 0) == 0 && sub && sub->contains("type")) {
    const json& t = sub->at("type");
    std::string want;
    if (t.is_array()) {
      for (const auto& x : t) want += (want.empty() ? "" : " or ") + x.get<std::string>();
    } else {
      want = t.get<std::string>();
    }
    std::string have = !value ? got : value->is_null() ? "null" : type_of(*value) + " " + got;
    return "expected " + want + ", got " + have;
  }
  if (description.rfind("Expected number greater than", 0) == 0 && sub && sub->contains("minimum")) {
    return got + " is below the minimum " + sub->at("minimum").dump();
  }
  if (description.rfind("Expected number less than", 0) == 0 && sub && sub->contains("maximum")) {
    return got + " is above the maximum " + sub->at("maximum").dump();
  }
  if (description.rfind("String should be no fewer than", 0) == 0 && sub &&
      sub->contains("minLength")) {
    return got + " is shorter than " + sub->at("minLength").dump() + " character(s)";
  }
  if (description.rfind("Failed to match expected value set by 'const'", 0) == 0) {
    if (tokens.size() == 1 && tokens[0] == "exit_code" && doc.contains("verdict") &&
        doc["verdict"].is_string()) {
      const std::string verdict = doc["verdict"].get<std::string>();
      return "exit code " + got + " does not match verdict \"" + verdict + "\" (expected " +
             std::to_string(exit_code_for(parse_outcome(verdict).value_or(Outcome::fail))) + ")";
    }
    if (sub && sub->contains("const")) return "expected " + sub->at("const").dump() + ", got " + got;
    return "unexpected value " + got;
  }
  if (description.rfind("Failed to match regex", 0) == 0 && sub && sub->contains("pattern")) {
    return got + " does not match the pattern " + sub->at("pattern").get<std::string>();
  }
  if (description.rfind("Missing required property", 0) == 0) {
    return "missing required property" + description.substr(25, description.size() - 26);
  }
  if (description.rfind("Object contains a property that could not be validated", 0) == 0) {
    auto q = description.find(": '");
    std::string name = q == std::string::npos ? "?" : description.substr(q + 2);
    if (!name.empty() && name.back() == '.') name.pop_back();
    return "unknown property " + name + " (not allowed here)";
  }
  std::string d = description;
  if (!d.empty() && d.back() == '.') d.pop_back();
  return d + (value ? " (got " + got + ")" : "");
}

}  // namespace

const std::string& verdict_schema_text() {
  static const std::string text = verdict_schema_source();
  return text;
}

std::vector<std::string> validate_verdict_json(const json& doc) {
  const Compiled& c = compiled();
  // One validator per thread, kept: it caches the compiled std::regex of each "pattern", which
  // would otherwise be rebuilt for every document (the most expensive part of validating).
  thread_local valijson::Validator validator(valijson::Validator::kStrongTypes);
  valijson::ValidationResults results;
  valijson::adapters::NlohmannJsonAdapter adapter(doc);
  std::vector<std::string> out;
  if (validator.validate(c.schema, adapter, &results)) return out;
  valijson::ValidationResults::Error e;
  std::vector<std::pair<std::vector<std::string>, std::string>> errors;
  while (results.popError(e)) errors.emplace_back(tokens_of(e.context), e.description);
  const bool has_leaf = std::any_of(errors.begin(), errors.end(),
                                    [](const auto& x) { return !is_wrapper(x.second); });
  for (const auto& [tokens, description] : errors) {
    if (has_leaf && is_wrapper(description)) continue;
    std::string line = pointer_of(tokens) + ": " + describe(doc, c.doc, tokens, description);
    if (std::find(out.begin(), out.end(), line) == out.end()) out.push_back(line);
  }
  return out;
}

}  // namespace ncclsmoke::results
