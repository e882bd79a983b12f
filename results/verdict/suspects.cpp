#include "results/verdict/suspects.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cctype>
#include <map>
#include <set>
#include <unordered_map>

namespace ncclsmoke::results {

namespace {

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) s.remove_suffix(1);
  return s;
}

// A line's text for a message: printable ASCII as is, anything else \xNN, at most 80 characters.
std::string shown(std::string_view s) {
  std::string out;
  for (unsigned char c : s) {
    if (out.size() >= 80) {
      out += "...";
      break;
    }
    if (c >= 0x20 && c < 0x7f)
      out += static_cast<char>(c);
    else
      out += fmt::format("\\x{:02x}", c);
  }
  return out;
}

// v.ranks looked up by rank and by host, indexed once per call rather than scanned for each
// finding (a fleet's thousands of findings over its thousands of ranks).
class RankLookup {
 public:
  explicit RankLookup(const Verdict& v) : v_(v) {
    for (std::size_t i = 0; i < v.ranks.size(); ++i) {
      const auto& r = v.ranks[i];
      if (r.through > r.rank)
        ranges_.push_back(i);
      else
        single_.try_emplace(r.rank, i);
      if (!r.host.empty() && !r.node.empty()) first_node_.try_emplace(r.host, r.node);
    }
  }
  // The first entry (in v.ranks' order) for `rank`, a range holding it included.
  const RankInfo* rank_of(int rank) const {
    std::size_t best = v_.ranks.size();
    if (auto it = single_.find(rank); it != single_.end()) best = it->second;
    for (std::size_t i : ranges_) {
      if (i >= best) break;
      const auto& r = v_.ranks[i];
      if (rank >= r.rank && rank <= r.through) best = i;
    }
    return best < v_.ranks.size() ? &v_.ranks[best] : nullptr;
  }
  // The node of the first rank on `host` that names one ("" none).
  std::string first_node(const std::string& host) const {
    auto it = first_node_.find(host);
    return it == first_node_.end() ? std::string() : it->second;
  }

 private:
  const Verdict& v_;
  std::unordered_map<int, std::size_t> single_;
  std::vector<std::size_t> ranges_;  // ascending
  std::unordered_map<std::string, std::string> first_node_;
};

// The hosts `f` blames (see the header).
std::vector<std::string> blamed_hosts(const RankLookup& v, const Finding& f) {
  if (!blames_host(f.code)) return {};
  // An Xid that does not mean the GPU needs a reset or replacing, or counters that moved without
  // the link going down (warnings), blame no one.
  if ((f.code == Code::GPU_XID || f.code == Code::GPU_HEALTH || f.code == Code::NIC_ERRORS) &&
      f.severity != Severity::error)
    return {};
  if (f.code == Code::MESH_BLOCKED) {
    if (!f.evidence.is_object() || !f.evidence.contains("suspect_rank") ||
        !f.evidence["suspect_rank"].is_number_integer())
      return {};
    const int r = f.evidence["suspect_rank"].get<int>();
    if (const auto* ri = v.rank_of(r); ri && !ri->host.empty()) return {ri->host};
    return f.hosts.empty() ? std::vector<std::string>{} : std::vector<std::string>{f.hosts.front()};
  }
  // A black hole at one host blames it; between two hosts, or on most paths, it is a path's or
  // the fabric's, like SLOW_LINK.
  if (f.code == Code::MTU_MISMATCH) return f.hosts.size() == 1 ? f.hosts : std::vector<std::string>{};
  // A silence heard only by witnesses whose own path is suspect (lossy_path_rule.h) blames no one.
  if (f.code == Code::PEER_STALLED && f.evidence.is_object() &&
      f.evidence.contains("witnesses_suspect"))
    return {};
  if (f.subject.peer >= 0) {
    if (!f.subject.peer_host.empty()) return {f.subject.peer_host};
    if (const auto* ri = v.rank_of(f.subject.peer); ri && !ri->host.empty()) return {ri->host};
    return {};
  }
  // A loss whose subject has no peer: the transport did not say which rank; its hosts are the
  // witnesses'.
  if ((f.code == Code::PEER_LOST || f.code == Code::PEER_STALLED) && !f.subject.empty()) return {};
  return f.hosts;
}

// The nodes of `host` for finding `f`: those of its ranks (and the subject's peer) on that host,
// else the first node of any rank on it, else the host itself.
std::set<std::string> nodes_of(const RankLookup& v, const Finding& f, const std::string& host) {
  std::set<std::string> nodes;
  std::vector<int> ranks = f.ranks;
  if (f.subject.peer >= 0) ranks.push_back(f.subject.peer);
  for (int r : ranks)
    if (const auto* ri = v.rank_of(r); ri && ri->host == host && !ri->node.empty())
      nodes.insert(ri->node);
  if (nodes.empty())
    if (auto node = v.first_node(host); !node.empty()) nodes.insert(node);
  if (nodes.empty()) nodes.insert(host);
  return nodes;
}

}  // namespace

bool blames_host(const AnyCode& code) {
  return code == Code::SLOW_HOST || code == Code::MTU_MISMATCH || code == Code::DATA_CORRUPTION ||
         code == Code::STRAGGLER || code == Code::PEER_LOST || code == Code::PEER_STALLED ||
         code == Code::HOST_EXCLUDED || code == Code::MESH_BLOCKED || code == Code::GPU_XID ||
         code == Code::GPU_HEALTH || code == Code::NIC_DOWN || code == Code::NIC_ERRORS;
}

std::vector<NamedHost> hosts_named(const Verdict& v) {
  std::vector<NamedHost> out;
  const RankLookup lookup(v);
  for (const auto& f : v.findings) {
    const auto blamed = blamed_hosts(lookup, f);
    std::vector<std::string> hosts;
    for (const auto& h : f.hosts)
      if (!h.empty() && std::find(hosts.begin(), hosts.end(), h) == hosts.end()) hosts.push_back(h);
    for (const auto& h : blamed)
      if (!h.empty() && std::find(hosts.begin(), hosts.end(), h) == hosts.end()) hosts.push_back(h);
    for (const auto& h : hosts) {
      const bool suspect = std::find(blamed.begin(), blamed.end(), h) != blamed.end();
      for (const auto& n : nodes_of(lookup, f, h))
        out.push_back({f.code, f.severity, h, n, suspect});
    }
  }
  return out;
}

std::vector<SuspectHost> suspect_hosts(const Verdict& v) {
  std::map<std::string, std::pair<std::string, std::set<std::string>>> by_node;
  for (const auto& n : hosts_named(v)) {
    if (!n.suspect) continue;
    auto& e = by_node[n.node];
    if (e.first.empty()) e.first = n.host;
    e.second.insert(std::string(n.code.str()));
  }
  std::vector<SuspectHost> out;
  for (auto& [node, e] : by_node) {
    if (out.size() == kMaxSuspects) break;
    out.push_back({node, e.first == node ? std::string() : e.first, {e.second.begin(), e.second.end()}});
  }
  return out;
}

std::string suspects_file_text(const Verdict& v) {
  std::string out;
  for (const auto& s : suspect_hosts(v)) {
    out += fmt::format("{} # {} run {}", s.node, fmt::join(s.codes, ","),
                       v.run_id.empty() ? std::string("unknown") : v.run_id);
    if (!s.host.empty()) out += " host " + s.host;
    out += "\n";
  }
  return out;
}

// ---- reading --------------------------------------------------------------------------------

std::string check_host_name(std::string_view name) {
  if (name.empty()) return "is empty";
  if (name.size() > 253) return fmt::format("is {} characters, more than a host name's 253", name.size());
  for (unsigned char c : name)
    if (!(std::isalnum(c) || c == '.' || c == '_' || c == '-'))
      return fmt::format("'{}' is not a host or node name (letters, digits, '.', '_', '-')",
                         shown(name));
  return "";
}

const SetAsideEntry* SetAsideList::find(std::string_view name) const {
  if (name.empty()) return nullptr;
  const std::string want = lower(name);
  for (const auto& e : entries)
    if (lower(e.name) == want) return &e;
  return nullptr;
}

bool SetAsideList::add(SetAsideEntry e) {
  if (find(e.name)) return true;
  if (entries.size() >= kMaxExcludedNames) return false;
  entries.push_back(std::move(e));
  return true;
}

std::optional<SetAsideProblem> parse_exclude_hosts(std::string_view text, SetAsideList& into) {
  std::size_t start = 0;
  while (start <= text.size()) {
    std::size_t comma = text.find(',', start);
    if (comma == std::string_view::npos) comma = text.size();
    std::string_view item = trim(text.substr(start, comma - start));
    start = comma + 1;
    if (item.empty()) continue;
    if (auto why = check_host_name(item); !why.empty())
      return SetAsideProblem{0, fmt::format("'{}' {}", shown(item), why)};
    if (!into.add({std::string(item), "--exclude-hosts", 0, {}, {}}))
      return SetAsideProblem{0, fmt::format("more than {} names", kMaxExcludedNames)};
  }
  return std::nullopt;
}

std::optional<SetAsideProblem> parse_suspects_text(std::string_view text, const std::string& source,
                                                   SetAsideList& into) {
  if (text.size() > kMaxExcludeFileBytes)
    return SetAsideProblem{0, fmt::format("is larger than {} bytes: not a suspects file",
                                          kMaxExcludeFileBytes)};
  int line_no = 0;
  std::size_t start = 0;
  while (start < text.size()) {
    std::size_t nl = text.find('\n', start);
    if (nl == std::string_view::npos) nl = text.size();
    std::string_view line = text.substr(start, nl - start);
    start = nl + 1;
    ++line_no;
    if (line.find('\0') != std::string_view::npos)
      return SetAsideProblem{line_no, "holds a NUL byte: not a text file"};
    std::string_view comment;
    if (auto hash = line.find('#'); hash != std::string_view::npos) {
      comment = trim(line.substr(hash + 1));
      line = line.substr(0, hash);
    }
    line = trim(line);
    if (line.empty()) continue;
    if (line.find_first_of(" \t,") != std::string_view::npos)
      return SetAsideProblem{line_no, fmt::format("'{}' holds more than one name (one host per "
                                                  "line; a comment follows '#')",
                                                  shown(line))};
    if (auto why = check_host_name(line); !why.empty())
      return SetAsideProblem{line_no, why[0] == '\'' ? why : fmt::format("'{}' {}", shown(line), why)};
    SetAsideEntry e{std::string(line), source, line_no, {}, {}};
    // "# CODES run ID [host H]": what put the host there (informational; anything else is kept out).
    std::vector<std::string_view> words;
    for (std::size_t i = 0; i < comment.size();) {
      while (i < comment.size() && comment[i] == ' ') ++i;
      std::size_t j = comment.find(' ', i);
      if (j == std::string_view::npos) j = comment.size();
      if (j > i) words.push_back(comment.substr(i, j - i));
      i = j;
    }
    auto plain = [](std::string_view w) {
      return w.size() <= 200 && std::all_of(w.begin(), w.end(), [](unsigned char c) {
               return std::isalnum(c) || c == '_' || c == ',' || c == '-' || c == '.';
             });
    };
    if (!words.empty() && plain(words[0]) && words[0] != "run") e.codes = std::string(words[0]);
    for (std::size_t i = 0; i + 1 < words.size(); ++i)
      if (words[i] == "run" && plain(words[i + 1])) e.run_id = std::string(words[i + 1]);
    if (!into.add(std::move(e)))
      return SetAsideProblem{line_no, fmt::format("more than {} names", kMaxExcludedNames)};
  }
  return std::nullopt;
}

std::string describe_origin(const SetAsideEntry& e) {
  if (e.line <= 0) return e.source;
  std::string out = fmt::format("{} line {}", e.source, e.line);
  if (!e.codes.empty() || !e.run_id.empty()) {
    out += " (";
    if (!e.codes.empty()) out += e.codes;
    if (!e.run_id.empty()) out += fmt::format("{}run {}", e.codes.empty() ? "" : ", ", e.run_id);
    out += ")";
  }
  return out;
}

}  // namespace ncclsmoke::results
