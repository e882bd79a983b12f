#pragma once
// The table of known finding codes (its entries: finding_codes.def): default severity and layer,
// what the code means for an operator, and a hint template. docs/findings.md is generated from
// this table (findings_markdown(); a test keeps the two identical).
//
// Codes are stable identifiers: dashboards and alert rules match on them. Add, never rename.
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "results/verdict/verdict.h"

namespace ncclsmoke::results {

struct FindingCode {
  Code code;
  Severity severity;                // default severity
  Layer layer;
  Outcome warning_effect;           // what severity "warning" does: degraded | inconclusive
  std::string_view meaning;         // one line: what it means for an operator
  std::string_view hint;            // template; {name} is replaced from make_finding()'s vars
};

const std::vector<FindingCode>& finding_codes();
// nullptr when the code is not in the table (Code::unknown, an unknown AnyCode, a bad text).
const FindingCode* find_code(Code code);
const FindingCode* find_code(const AnyCode& code);
const FindingCode* find_code(std::string_view code);

// A finding with severity, layer and hint taken from the table; `{name}` placeholders in the hint
// are replaced from `hint_vars` ("<name>" when a variable is not given). The code is a Code, so
// a typo does not compile; throws std::invalid_argument for Code::unknown.
Finding make_finding(Code code, std::string message,
                     std::vector<int> ranks = {}, std::vector<std::string> hosts = {},
                     const std::map<std::string, std::string>& hint_vars = {});

// A finding lists at most this many ranks (the lowest); evidence.ranks_total then counts them
// all, and the message (finding_text.h rank_list) names them as ranges. A WORLD_SIZE of a million
// with one rank present is one finding of 1,024 ranks, not a 7 MB line.
inline constexpr std::size_t kMaxListedRanks = 1024;
// Sorts and dedupes f.ranks, then applies kMaxListedRanks (keeping the largest ranks_total seen).
void cap_listed_ranks(Finding& f);

// A finding about `subject` (verdict.h): its message is `message_template` rendered
// (finding_text.h), "{reporter}" / "{peer}" standing for the subject's ranks, so merging it with
// the same finding from other ranks re-renders it instead of rewriting its text. `ranks`/`hosts`
// and the hint as for make_finding.
Finding make_finding_about(Code code, Subject subject, std::string message_template,
                           std::vector<int> ranks = {}, std::vector<std::string> hosts = {},
                           const std::map<std::string, std::string>& hint_vars = {});

// Replaces {name} in `tmpl` from `vars`; unknown names become "<name>".
std::string fill_template(std::string_view tmpl, const std::map<std::string, std::string>& vars);

// docs/findings.md: the table as Markdown.
std::string findings_markdown();

}  // namespace ncclsmoke::results
