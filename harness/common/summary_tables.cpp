#include "harness/common/summary_tables.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <utility>
#include <vector>

#include "harness/common/log.h"
#include "harness/common/progress.h"
#include "results/report/summary.h"
#include "results/verdict/finding_text.h"
#include "results/verdict/phase_id.h"
#include "transports/registry.h"

namespace ncclsmoke::harness {
namespace {

using nlohmann::json;

// One size of one transport: its out-of-place and in-place world rows.
struct SizeRows {
  const results::TransportRow* out = nullptr;
  const results::TransportRow* in = nullptr;
};
struct TransportRows {
  std::string transport;
  std::vector<std::pair<std::int64_t, SizeRows>> sizes;  // in the verdict's order
};

std::vector<TransportRows> world_rows(const results::Verdict& v) {
  std::vector<TransportRows> out;
  for (const auto& r : v.transports) {
    if (r.rank != -1) continue;
    auto t = std::find_if(out.begin(), out.end(),
                          [&](const TransportRows& x) { return x.transport == r.transport; });
    if (t == out.end()) t = out.insert(out.end(), TransportRows{r.transport, {}});
    auto s = std::find_if(t->sizes.begin(), t->sizes.end(),
                          [&](const auto& x) { return x.first == r.bytes; });
    if (s == t->sizes.end()) s = t->sizes.insert(t->sizes.end(), {r.bytes, SizeRows{}});
    (r.in_place ? s->second.in : s->second.out) = &r;
  }
  return out;
}

// Which mode of this size the headline gate number comes from ("" none).
std::string gate_mode(const std::vector<results::GateHeadline>& heads, const SizeRows& s) {
  for (const auto& h : heads) {
    if (!h.row) continue;
    if (h.row == s.out) return "out-of-place";
    if (h.row == s.in) return "in-place";
  }
  return "";
}

std::string number(double x) { return std::isfinite(x) ? fmt::format("{}", x) : ""; }

std::string text_table(const results::Verdict& v) {
  const auto heads = results::gate_headlines(v);
  std::string out;
  for (const auto& t : world_rows(v)) {
    out += fmt::format("\n# transport {}: all_reduce, {} ranks; each row the mean over every rank, "
                       "#wrong their sum\n",
                       t.transport, v.world.size);
    for (const auto& h : table_header_lines()) out += h + "\n";
    double bw_sum = 0;
    int bw_n = 0;
    std::int64_t wrong = 0;
    bool checked = false;
    std::string gate;
    for (const auto& [bytes, s] : t.sizes) {
      const auto* any = s.out ? s.out : s.in;
      TableRow row;
      row.bytes = static_cast<std::uint64_t>(bytes);
      row.count = static_cast<std::uint64_t>(any->count);
      row.type = any->dtype;
      row.out_of_place = table_mode(s.out);
      row.in_place = table_mode(s.in);
      out += table_row_line(row) + "\n";
      for (const auto* r : {s.out, s.in}) {
        if (!r) continue;
        if (std::isfinite(r->busbw_gbps)) {
          bw_sum += r->busbw_gbps;
          ++bw_n;
        }
        if (r->wrong >= 0) {
          wrong += r->wrong;
          checked = true;
        }
      }
      if (auto m = gate_mode(heads, s); !m.empty()) {
        const auto* r = m == "in-place" ? s.in : s.out;
        gate = fmt::format("# gate: {} B {}, busbw {:.2f} GB/s (the lower of the two modes)", bytes,
                           m, r->busbw_gbps);
      }
    }
    if (!gate.empty()) out += gate + "\n";
    out += checked ? fmt::format("# Out of bounds values : {} {}\n", wrong, wrong ? "FAILED" : "OK")
                   : std::string("# Out of bounds values : N/A (not checked)\n");
    out += fmt::format("# Avg bus bandwidth    : {:g}\n", bw_n ? bw_sum / bw_n : 0.0);
  }
  return out;
}

std::string csv_table(const results::Verdict& v) {
  const auto heads = results::gate_headlines(v);
  std::string out =
      "transport,ranks,size,count,type,redop,root,oop_time_us,oop_algbw_gbps,oop_busbw_gbps,"
      "oop_wrong,ip_time_us,ip_algbw_gbps,ip_busbw_gbps,ip_wrong,gate\n";
  auto mode = [](const results::TransportRow* r) {
    if (!r) return std::string(",,,");
    return fmt::format("{},{},{},{}", number(r->time_us), number(r->algbw_gbps),
                       number(r->busbw_gbps), r->wrong < 0 ? "" : std::to_string(r->wrong));
  };
  for (const auto& t : world_rows(v))
    for (const auto& [bytes, s] : t.sizes) {
      const auto* any = s.out ? s.out : s.in;
      out += fmt::format("{},{},{},{},{},sum,-1,{},{},{}\n", t.transport, v.world.size, bytes,
                         any->count, any->dtype, mode(s.out), mode(s.in), gate_mode(heads, s));
    }
  return out;
}

std::string json_table(const results::Verdict& v) {
  const auto heads = results::gate_headlines(v);
  auto mode = [](const results::TransportRow* r) -> json {
    if (!r) return nullptr;
    auto num = [](double x) { return std::isfinite(x) ? json(x) : json(nullptr); };
    return {{"time_us", num(r->time_us)},
            {"algbw_gbps", num(r->algbw_gbps)},
            {"busbw_gbps", num(r->busbw_gbps)},
            {"wrong", r->wrong < 0 ? json(nullptr) : json(r->wrong)}};
  };
  json rows = json::array();
  for (const auto& t : world_rows(v))
    for (const auto& [bytes, s] : t.sizes) {
      const auto* any = s.out ? s.out : s.in;
      auto g = gate_mode(heads, s);
      rows.push_back({{"transport", t.transport},
                      {"ranks", v.world.size},
                      {"size", bytes},
                      {"count", any->count},
                      {"type", any->dtype},
                      {"redop", "sum"},
                      {"root", -1},
                      {"out_of_place", mode(s.out)},
                      {"in_place", mode(s.in)},
                      {"gate", g.empty() ? json(nullptr) : json(g)}});
    }
  json doc = {{"run_id", v.run_id}, {"verdict", results::to_string(v.verdict)}, {"rows", rows}};
  return doc.dump(-1, ' ', false, json::error_handler_t::replace) + "\n";
}

// ---- what carried the bytes ---------------------------------------------------------------------

// "rank 3", "ranks 0-2, 5" (results::rank_runs).
std::string ranks_text(const std::vector<int>& ranks) {
  const std::set<int> distinct(ranks.begin(), ranks.end());
  return (distinct.size() == 1 ? "rank " : "ranks ") + results::rank_runs(ranks);
}

// The backend's own words (transports/carried.h); a transport this binary does not know: none.
std::string identity_line(const std::string& transport, const json& o) {
  const auto* b = transports::find_backend(transport);
  return b && b->carried.line ? b->carried.line(o) : "";
}

std::vector<std::string> warnings_for(const std::string& transport,
                                      const std::vector<json>& observed,
                                      const results::Verdict& v) {
  const auto* b = transports::find_backend(transport);
  return b && b->carried.warnings ? b->carried.warnings(observed, v.env)
                                  : std::vector<std::string>{};
}

}  // namespace

std::optional<TableFormat> parse_table_format(std::string_view text) {
  std::string t(text);
  for (auto& c : t) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (t == "text") return TableFormat::text;
  if (t == "csv") return TableFormat::csv;
  if (t == "json") return TableFormat::json;
  return std::nullopt;
}

std::string summary_table(const results::Verdict& v, TableFormat format) {
  if (world_rows(v).empty()) return format == TableFormat::json ? json_table(v) : "";
  switch (format) {
    case TableFormat::text: return text_table(v);
    case TableFormat::csv: return csv_table(v);
    case TableFormat::json: return json_table(v);
  }
  return "";
}

std::string carried_lines(const results::Verdict& v) {
  std::vector<std::string> asked;
  for (const auto& p : v.phases)
    if (auto id = results::PhaseId::parse(p.name); id.kind == results::PhaseKind::transport)
      asked.push_back(id.transport);
  if (asked.empty()) return "";
  std::size_t width = 0;
  for (const auto& t : asked) width = std::max(width, t.size());
  std::string out = "\ncarried by (each transport's identify(); verdict.json has the rest):\n";
  const std::string indent(2 + width + 2, ' ');
  for (const auto& t : asked) {
    // Distinct lines over the ranks' identities, each with the ranks that gave it.
    std::vector<std::pair<std::string, std::vector<int>>> lines;
    std::vector<json> observed;
    for (const auto& id : v.identities) {
      if (id.transport != t) continue;
      observed.push_back(id.observed);
      std::string line = identity_line(t, id.observed);
      if (line.empty()) continue;
      auto it = std::find_if(lines.begin(), lines.end(), [&](auto& e) { return e.first == line; });
      if (it == lines.end()) it = lines.insert(lines.end(), {line, {}});
      if (id.rank >= 0) it->second.push_back(id.rank);
    }
    std::string text;
    const results::Phase* phase = nullptr;
    for (const auto& p : v.phases)
      if (results::PhaseId::parse(p.name).is_transport(t)) phase = &p;
    // A transport that never opened carried nothing: its phase says why (not a blank identity).
    const bool opened = phase && phase->status != results::PhaseStatus::skipped &&
                        phase->status != results::PhaseStatus::not_run;
    if (lines.empty() || !opened) {
      if (phase)
        text = results::to_string(phase->status) + (phase->detail.empty() ? "" : ": " + phase->detail);
      if (text.size() > 240) text = text.substr(0, 240) + "... (the summary above has it whole)";
      if (text == "pass" || text.empty()) text += (text.empty() ? "" : ": ") + std::string("identify() reported nothing");
    } else if (lines.size() == 1) {
      text = lines[0].first;
    } else {
      for (const auto& [line, ranks] : lines)
        text += (text.empty() ? "" : "; ") + line + (ranks.empty() ? "" : " (" + ranks_text(ranks) + ")");
    }
    out += "  " + t + std::string(width - t.size(), ' ') + "  " + text + "\n";
    for (const auto& w : warnings_for(t, observed, v)) out += indent + w + "\n";
  }
  return out;
}

std::string baseline_hint(const results::Verdict& v) {
  for (const auto& f : v.findings)
    if (f.code == results::Code::BASELINE_MISSING) return "";
  std::string profile;
  bool unjudged = false;
  for (const auto& h : results::gate_headlines(v)) {
    if (h.gate.synthetic || !std::isfinite(h.gate.busbw_gbps)) continue;
    if (std::isfinite(h.gate.baseline_gbps) && h.gate.baseline_gbps > 0) continue;
    unjudged = true;
    if (profile.empty()) profile = h.gate.profile;
  }
  if (!unjudged) return "";
  const std::string p = profile.empty() ? "P" : profile;
  return fmt::format(
      "\nno baseline: the bandwidth was measured but not judged. Record passing runs (--history DB),"
      "\n  learn one with `ncclsmoke baseline learn --history DB --profiles FILE --profile {} "
      "--write FILE`,\n  then judge against it with --profiles FILE --profile {}.\n",
      p, p);
}

void print_run_summary(const results::Verdict& v, const std::string& table_format, bool quiet) {
  const TableFormat format = parse_table_format(table_format).value_or(TableFormat::text);
  const bool json_log = log_is_json();
  if (format == TableFormat::text) {
    if (json_log || quiet) return;
    std::cout << results::human_summary(v) << carried_lines(v) << baseline_hint(v)
              << summary_table(v, format) << std::flush;
    return;
  }
  if (!json_log && !quiet)
    std::cerr << results::human_summary(v) << carried_lines(v) << baseline_hint(v) << std::flush;
  std::cout << summary_table(v, format) << std::flush;
}

}  // namespace ncclsmoke::harness
