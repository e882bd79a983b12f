#pragma once
// The verdict's JSON Schema (results/verdict/verdict.schema.json, draft 7), compiled into the library so
// validation needs no file at run time. valijson does the validation; this adds JSON-pointer paths
// and the offending value to its messages so a reader of a bad document knows where to look.
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace ncclsmoke::results {

// The schema text exactly as in results/verdict/verdict.schema.json at build time.
const std::string& verdict_schema_text();

// Empty when `doc` is a valid verdict. Otherwise one line per problem, e.g.
//   /findings/0/severity: "fatal" is not one of "error", "warning", "info"
//   /: missing required property 'verdict'
std::vector<std::string> validate_verdict_json(const nlohmann::json& doc);

}  // namespace ncclsmoke::results
