#include "results/verdict/finding_codes.h"

#include "results/verdict/finding_text.h"

#include <algorithm>
#include <stdexcept>

namespace ncclsmoke::results {

namespace {

const std::vector<FindingCode> kCodes = {
#define NCCLSMOKE_CODE(name, severity, layer, warning_effect, meaning, hint) \
  {Code::name, Severity::severity, Layer::layer, Outcome::warning_effect, meaning, hint},
#include "results/verdict/finding_codes.def"
#undef NCCLSMOKE_CODE
};

}  // namespace

const std::vector<FindingCode>& finding_codes() { return kCodes; }

const FindingCode* find_code(Code code) {
  auto i = static_cast<std::size_t>(code);
  // The table is in enumerator order (enums.h); the results tests check it.
  if (i < kCodes.size() && kCodes[i].code == code) return &kCodes[i];
  for (const auto& c : kCodes) {
    if (c.code == code) return &c;
  }
  return nullptr;
}

const FindingCode* find_code(const AnyCode& code) { return find_code(code.code()); }

const FindingCode* find_code(std::string_view code) {
  auto c = parse_code(code);
  return c ? find_code(*c) : nullptr;
}

std::string fill_template(std::string_view tmpl, const std::map<std::string, std::string>& vars) {
  std::string out;
  out.reserve(tmpl.size());
  size_t i = 0;
  while (i < tmpl.size()) {
    if (tmpl[i] == '{') {
      size_t close = tmpl.find('}', i + 1);
      if (close != std::string_view::npos) {
        std::string name(tmpl.substr(i + 1, close - i - 1));
        auto it = vars.find(name);
        out += it != vars.end() ? it->second : "<" + name + ">";
        i = close + 1;
        continue;
      }
    }
    out += tmpl[i++];
  }
  return out;
}

Finding make_finding(Code code, std::string message, std::vector<int> ranks,
                     std::vector<std::string> hosts,
                     const std::map<std::string, std::string>& hint_vars) {
  const FindingCode* c = find_code(code);
  if (!c) throw std::invalid_argument("make_finding: Code::unknown is not a finding code");
  Finding f;
  f.code = c->code;
  f.severity = c->severity;
  f.layer = c->layer;
  f.ranks = std::move(ranks);
  f.hosts = std::move(hosts);
  f.message = std::move(message);
  f.hint = fill_template(c->hint, hint_vars);
  if (f.ranks.size() > kMaxListedRanks) cap_listed_ranks(f);
  return f;
}

void cap_listed_ranks(Finding& f) {
  std::sort(f.ranks.begin(), f.ranks.end());
  f.ranks.erase(std::unique(f.ranks.begin(), f.ranks.end()), f.ranks.end());
  if (f.ranks.size() <= kMaxListedRanks) return;
  std::size_t total = f.ranks.size();
  if (f.evidence.is_object() && f.evidence.contains("ranks_total") &&
      f.evidence["ranks_total"].is_number_unsigned())
    total = std::max(total, f.evidence["ranks_total"].get<std::size_t>());
  if (!f.evidence.is_object()) f.evidence = nlohmann::json::object();
  f.evidence["ranks_total"] = total;
  f.ranks.resize(kMaxListedRanks);
}

Finding make_finding_about(Code code, Subject subject, std::string message_template,
                           std::vector<int> ranks, std::vector<std::string> hosts,
                           const std::map<std::string, std::string>& hint_vars) {
  Finding f = make_finding(code, std::string(), std::move(ranks), std::move(hosts), hint_vars);
  f.subject = std::move(subject);
  f.message_template = std::move(message_template);
  render(f);
  return f;
}

std::string findings_markdown() {
  std::string md =
      "# Finding codes\n\n"
      "<!-- Generated from results/verdict/finding_codes.def (findings_markdown()); "
      "tests/results keeps this file identical. -->\n\n"
      "Every problem a run finds is a finding in the verdict's `findings[]` with one of these "
      "codes, the ranks and hosts it concerns, a one-line message and a hint. Severity `error` "
      "makes the run `fail` (exit 1); `warning` makes it `degraded` (exit 3) or `inconclusive` "
      "(exit 4) as the column *warning means* says; `info` changes nothing. Placeholders in braces are "
      "filled in by the run.\n\n"
      "| code | layer | default severity | warning means | what it means for an operator | hint |\n"
      "|---|---|---|---|---|---|\n";
  for (const auto& c : kCodes) {
    md += "| `" + to_string(c.code) + "` | " + to_string(c.layer) + " | " +
          to_string(c.severity) + " | " + to_string(c.warning_effect) + " | " +
          std::string(c.meaning) + " | " + std::string(c.hint) + " |\n";
  }
  // One heading per code, so an alert's runbook_url can point at docs/findings.md#<code in
  // lower case> (GitHub's heading anchor).
  md += "\n## By code\n";
  for (const auto& c : kCodes) {
    md += "\n### " + to_string(c.code) + "\n\n" + std::string(c.meaning) + "\n\n*Layer* " +
          to_string(c.layer) + ", *default severity* " + to_string(c.severity) +
          ". *What to do:* " + std::string(c.hint) + "\n";
  }
  md +=
      "\nExit codes: 0 pass, 1 fail, 2 usage error, 3 degraded, 4 inconclusive. "
      "`inconclusive` (a required phase skipped or not run, a missing measurement or baseline) is "
      "never `pass`.\n";
  return md;
}

}  // namespace ncclsmoke::results
