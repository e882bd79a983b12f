#include "results/verdict/finding_text.h"

#include <fmt/format.h>

#include <algorithm>
#include <iterator>
#include <string_view>


namespace ncclsmoke::results {

Subject reported_by(rendezvous::RankRef self, std::string phase, std::string item,
                    std::string transport) {
  Subject s;
  if (self.rank >= 0) s.reporters = {self.rank};
  s.reporter_host = std::string(self.host);
  s.phase = std::move(phase);
  s.item = std::move(item);
  s.transport = std::move(transport);
  return s;
}

std::string rank_list(const std::set<int>& ranks) {
  return rank_runs(std::vector<int>(ranks.begin(), ranks.end()), ranks.size());
}

std::string host_names(const std::vector<std::string>& hosts, std::size_t max_shown) {
  std::vector<std::string> shown;
  for (const auto& h : hosts) {
    if (shown.size() == max_shown) break;
    shown.push_back(h.empty() ? "unknown" : h);
  }
  std::string out = fmt::format("{}", fmt::join(shown, ", "));
  if (hosts.size() > shown.size()) out += fmt::format(" and {} more", hosts.size() - shown.size());
  return out;
}

std::string rank_runs(const std::vector<int>& unsorted, std::size_t max_runs) {
  std::vector<int> ranks = unsorted;
  std::sort(ranks.begin(), ranks.end());
  ranks.erase(std::unique(ranks.begin(), ranks.end()), ranks.end());
  std::string out;
  std::size_t runs = 0;
  for (std::size_t i = 0; i < ranks.size();) {
    if (runs == max_runs) {
      out += fmt::format(", ... and {} more rank{}", ranks.size() - i, ranks.size() - i > 1 ? "s" : "");
      break;
    }
    std::size_t j = i;
    while (j + 1 < ranks.size() && ranks[j + 1] == ranks[j] + 1) ++j;
    if (!out.empty()) out += ", ";
    out += std::to_string(ranks[i]);
    if (j > i) out += (j == i + 1 ? ", " : "-") + std::to_string(ranks[j]);
    ++runs;
    i = j + 1;
  }
  return out;
}

std::string reporters_text(const Subject& s) {
  std::set<int> ranks(s.reporters.begin(), s.reporters.end());
  if (ranks.size() <= 1)
    return rendezvous::rank_text(ranks.empty() ? -1 : *ranks.begin(), s.reporter_host);
  std::string out = "ranks " + rank_list(ranks);
  if (!s.reporter_host.empty()) out += " (host " + s.reporter_host + ")";
  return out;
}

std::string render_message(const Finding& f) {
  if (f.message_template.empty()) return f.message;
  static constexpr std::string_view kReporter = "{reporter}", kPeer = "{peer}";
  const std::string_view t = f.message_template;
  std::string out;
  out.reserve(t.size() + 32);
  for (std::size_t i = 0; i < t.size();) {
    if (t.substr(i, kReporter.size()) == kReporter) {
      out += reporters_text(f.subject);
      i += kReporter.size();
    } else if (t.substr(i, kPeer.size()) == kPeer) {
      out += rendezvous::rank_text(f.subject.peer, f.subject.peer_host);
      i += kPeer.size();
    } else {
      out += t[i++];
    }
  }
  return out;
}

void render(Finding& f) { f.message = render_message(f); }

void wrap_message(Finding& f, std::string_view prefix, std::string_view suffix) {
  std::string& text = f.message_template.empty() ? f.message : f.message_template;
  text = std::string(prefix) + text + std::string(suffix);
  render(f);
}

void set_message_template(Finding& f, std::string tmpl) {
  f.message_template = std::move(tmpl);
  render(f);
}

}  // namespace ncclsmoke::results
