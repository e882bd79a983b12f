#include "rendezvous/join.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <map>
#include <nlohmann/json.hpp>
#include <utility>

#include "rendezvous/bounded_json.h"
#include "rendezvous/rank_runs.h"

namespace ncclsmoke::rendezvous {
namespace {

using nlohmann::json;

std::string rank_key(int r) { return "join/rank/" + std::to_string(r); }
// Set (not compare-set) after the claim: torch <= 2.0's server wakes WAITers on SET but not on
// COMPARE_SET (seen with Debian's 1.13: a WAIT on a key another client compare-sets times out),
// so rank 0 waits on this key when the store is torch's agent store.
std::string here_key(int r) { return "join/here/" + std::to_string(r); }
std::string arrived_key(int r) { return "join/arrived/" + std::to_string(r); }
// Ranks rank 0 reads in one CHECK and one MULTI_GET when they are all here (claims ~230 bytes).
constexpr int kJoinBatch = 256;
const char* const kCountKey = "join/count";
constexpr Millis kTailBudget{2000};

// Reads "missing_ranges" (or the plain "missing" list of earlier versions), keeping only ranks of
// this world (a roster cannot make a rank hold more than world_size entries).
std::vector<int> missing_of(const json& roster, int world_size) {
  std::vector<int> out;
  auto ranges = roster.find("missing_ranges");
  if (ranges != roster.end() && ranges->is_array()) {
    for (const auto& p : *ranges) {
      if (!p.is_array() || p.size() != 2 || !p[0].is_number_integer() || !p[1].is_number_integer())
        continue;
      const int64_t lo = p[0].get<int64_t>(), hi = p[1].get<int64_t>();
      for (int64_t r = std::max<int64_t>(lo, 0); r <= hi && r < world_size; ++r)
        out.push_back(static_cast<int>(r));
      if (out.size() >= static_cast<std::size_t>(world_size)) break;  // overlapping ranges
    }
    std::sort(out.begin(), out.end());
    out.erase(std::unique(out.begin(), out.end()), out.end());
    return out;
  }
  auto list = roster.find("missing");
  if (list != roster.end() && list->is_array())
    for (const auto& r : *list)
      if (r.is_number_integer() && r.get<int64_t>() >= 0 && r.get<int64_t>() < world_size)
        out.push_back(r.get<int>());
  return out;
}

}  // namespace

std::string Identity::to_json() const {
  return json{{"rank", rank},
              {"world_size", world_size},
              {"host", host},
              {"node", node},
              {"pid", pid},
              {"local_address", local_address},
              {"interface", interface},
              {"link_speed_mbps", link_speed_mbps},
              {"token", token}}
      .dump();
}

namespace {
// One roster entry, already parsed: every rank reads the whole roster, so at 1024 ranks a
// dump-and-reparse per entry is a million entries of wasted work across the world.
std::optional<Identity> identity_of(const json& j) {
  if (!j.is_object()) return std::nullopt;
  Identity id;
  try {
    id.rank = j.at("rank").get<int>();
    id.world_size = j.value("world_size", 0);
    id.host = j.value("host", "");
    id.node = j.value("node", "");
    id.pid = j.value("pid", 0);
    id.local_address = j.value("local_address", "");
    id.interface = j.value("interface", "");
    id.link_speed_mbps = std::max(0, j.value("link_speed_mbps", 0));
    id.token = j.value("token", "");
  } catch (const json::exception&) {
    return std::nullopt;
  }
  return id;
}

// The roster's present ranks as runs: consecutive ranks with the same host, node and address are
// one entry [first, last, host, node, address], the strings as indices into the roster's "hosts",
// "nodes" and "addresses" tables. Every rank reads the roster, so rank 0 sends it once per rank:
// one object per rank (about 230 bytes) made it 3.7 MB at 16,384 ranks, 60 GB out of rank 0 in
// all; as runs it grows with the hosts. Only what the other ranks use travels (rank, host, node,
// address); the rest of an identity (pid, interface, link speed, token) stays with rank 0, which
// read every claim and writes the world's verdict.
json present_runs(const std::vector<Identity>& present) {
  json runs = json::array(), hosts = json::array(), nodes = json::array(),
       addresses = json::array();
  std::map<std::string, int> host_at, node_at, address_at;
  auto index = [](std::map<std::string, int>& at, json& table, const std::string& s) {
    auto [it, fresh] = at.try_emplace(s, static_cast<int>(table.size()));
    if (fresh) table.push_back(s);
    return it->second;
  };
  for (const auto& id : present) {
    const int h = index(host_at, hosts, id.host), n = index(node_at, nodes, id.node),
              a = index(address_at, addresses, id.local_address);
    if (!runs.empty()) {
      json& last = runs.back();
      if (last[1].get<int>() + 1 == id.rank && last[2] == h && last[3] == n && last[4] == a) {
        last[1] = id.rank;
        continue;
      }
    }
    runs.push_back(json::array({id.rank, id.rank, h, n, a}));
  }
  return json{{"present_runs", std::move(runs)},
              {"hosts", std::move(hosts)},
              {"nodes", std::move(nodes)},
              {"addresses", std::move(addresses)}};
}

// The roster's runs back into identities (world_size: ours); a run outside the world or naming
// a missing table entry is skipped, and no rank is listed twice.
std::vector<Identity> identities_of_runs(const json& roster, int world_size) {
  std::vector<Identity> out;
  auto table = [&](const char* name) -> const json* {
    auto it = roster.find(name);
    return it != roster.end() && it->is_array() ? &*it : nullptr;
  };
  const json *runs = table("present_runs"), *hosts = table("hosts"), *nodes = table("nodes"),
             *addresses = table("addresses");
  if (!runs || !hosts || !nodes || !addresses) return out;
  auto text_at = [](const json* t, const json& i) -> std::optional<std::string> {
    if (!i.is_number_integer()) return std::nullopt;
    const int64_t k = i.get<int64_t>();
    if (k < 0 || k >= static_cast<int64_t>(t->size()) || !(*t)[k].is_string()) return std::nullopt;
    return (*t)[k].get<std::string>();
  };
  std::vector<bool> seen(static_cast<std::size_t>(std::max(world_size, 0)), false);
  for (const auto& run : *runs) {
    if (!run.is_array() || run.size() != 5 || !run[0].is_number_integer() ||
        !run[1].is_number_integer())
      continue;
    auto host = text_at(hosts, run[2]), node = text_at(nodes, run[3]),
         address = text_at(addresses, run[4]);
    if (!host || !node || !address) continue;
    const int64_t lo = std::max<int64_t>(run[0].get<int64_t>(), 0);
    const int64_t hi = std::min<int64_t>(run[1].get<int64_t>(), world_size - 1);
    for (int64_t r = lo; r <= hi; ++r) {
      if (seen[r]) continue;
      seen[r] = true;
      Identity id;
      id.rank = static_cast<int>(r);
      id.world_size = world_size;
      id.host = *host;
      id.node = *node;
      id.local_address = *address;
      out.push_back(std::move(id));
    }
  }
  return out;
}
}  // namespace

std::optional<Identity> Identity::from_json(const std::string& text) {
  auto j = parse_bounded_or_discarded(text, kMaxSmallJsonBytes);
  if (j.is_discarded()) return std::nullopt;
  return identity_of(j);
}

// ---- the roster once per node ---------------------------------------------------------------

namespace {

// FNV-1a, 64 bits: the same name for the same run and host in every build (std::hash need not be).
uint64_t name_hash(std::initializer_list<std::string_view> parts) {
  uint64_t h = 1469598103934665603ull;
  for (auto part : parts) {
    for (unsigned char ch : part) {
      h ^= ch;
      h *= 1099511628211ull;
    }
    h ^= 0xff;  // a separator no byte of a part spells: ("ab","c") and ("a","bc") differ
    h *= 1099511628211ull;
  }
  return h;
}

// A file this rank may take another rank's word from: a plain file (not a link), ours, that
// nobody else can write, at most `max_bytes`.
bool trusted(const struct stat& st, std::size_t max_bytes) {
  return S_ISREG(st.st_mode) && st.st_uid == ::geteuid() &&
         (st.st_mode & (S_IWGRP | S_IWOTH)) == 0 && static_cast<std::size_t>(st.st_size) <= max_bytes;
}

bool trusted_file_exists(const std::filesystem::path& path) {
  struct stat st {};
  return ::lstat(path.c_str(), &st) == 0 && trusted(st, kMaxSmallJsonBytes);
}

// Written whole or not at all: a temporary file beside `path` (mkstemp: 0600), renamed over it.
bool write_whole(const std::filesystem::path& path, std::string_view text) {
  std::string temp = path.string() + ".XXXXXX";
  int fd = ::mkstemp(temp.data());
  if (fd < 0) return false;
  std::size_t done = 0;
  while (done < text.size()) {
    ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    done += static_cast<std::size_t>(n);
  }
  bool ok = ::close(fd) == 0 && done == text.size() && ::rename(temp.c_str(), path.c_str()) == 0;
  if (!ok) ::unlink(temp.c_str());
  return ok;
}

}  // namespace

RosterCopy::RosterCopy(RosterCopy&& other) noexcept { *this = std::move(other); }

RosterCopy& RosterCopy::operator=(RosterCopy&& other) noexcept {
  if (this != &other) {
    remove_files();
    path_ = std::move(other.path_);
    leader_ = other.leader_;
    follower_wait_ = other.follower_wait_;
    copied_key_ = std::move(other.copied_key_);
    left_ = std::exchange(other.left_, false);
    read_the_copy_ = other.read_the_copy_;
    other.path_.clear();
  }
  return *this;
}

RosterCopy::~RosterCopy() { remove_files(); }

RosterCopy RosterCopy::for_host(std::string_view job_namespace, std::string_view run_id,
                                std::string_view host, bool leader, Millis follower_wait,
                                std::filesystem::path dir) {
  if (dir.empty()) {
    std::error_code ec;
    dir = std::filesystem::temp_directory_path(ec);
    if (ec) dir = "/tmp";
  }
  char hash[17];
  std::snprintf(hash, sizeof hash, "%016llx",
                static_cast<unsigned long long>(name_hash({job_namespace, run_id, host})));
  RosterCopy copy;
  copy.path_ = dir / (std::string("ncclsmoke-roster-") + hash);
  copy.copied_key_ = std::string("join/roster_copied/") + hash;
  copy.leader_ = leader;
  copy.follower_wait_ = follower_wait;
  return copy;
}

std::filesystem::path RosterCopy::mark_path() const {
  auto p = path_;
  p += ".leader";
  return p;
}

void RosterCopy::announce() {
  if (path_.empty() || !leader_) return;
  left_ = true;
  write_whole(mark_path(), std::to_string(::getpid()));
}

void RosterCopy::leave(Store& store, std::string_view roster_text) {
  if (path_.empty() || !leader_) return;
  left_ = true;
  // A copy that could not be written gets no word: the followers read the store after their wait.
  if (write_whole(path_, roster_text)) store.set(copied_key_, "1");
}

std::optional<std::string> RosterCopy::read_copy() const {
  int fd = ::open(path_.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) return std::nullopt;
  struct stat st {};
  std::optional<std::string> text;
  if (::fstat(fd, &st) == 0 && trusted(st, kMaxStorePostJsonBytes)) {
    std::string buf(static_cast<std::size_t>(st.st_size), '\0');
    std::size_t done = 0;
    while (done < buf.size()) {
      ssize_t n = ::read(fd, buf.data() + done, buf.size() - done);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;
      done += static_cast<std::size_t>(n);
    }
    if (done == buf.size() && !buf.empty()) text = std::move(buf);
  }
  ::close(fd);
  return text;
}

std::string RosterCopy::read(Store& store, const std::string& key, Deadline deadline) {
  read_the_copy_ = false;
  if (path_.empty() || leader_) {
    std::string text = store.get(key, deadline);
    leave(store, text);
    return text;
  }
  store.wait({key}, deadline);
  // The leader marked itself before its claim, and rank 0 publishes after the claims: no mark
  // now means no leader shares this node's temporary directory (or it never joined).
  if (trusted_file_exists(mark_path())) {
    try {
      store.wait({copied_key_}, Clock::now() + follower_wait_);
      if (auto text = read_copy()) {
        read_the_copy_ = true;
        return std::move(*text);
      }
    } catch (const StoreError& e) {
      if (e.error_class() != ErrorClass::timed_out) throw;  // no word in time: the store's
    }
  }
  // The key is in the store (the WAIT said so): the GET waits only behind other replies.
  return store.get(key, std::max(deadline, Clock::now() + follower_wait_));
}

void RosterCopy::remove_files() noexcept {
  if (!left_ || path_.empty()) return;
  ::unlink(path_.c_str());
  ::unlink(mark_path().c_str());
  left_ = false;
}

JoinResult join_world(Store& store, const Identity& self, Deadline deadline,
                      Millis roster_grace, const JoinWatch& watch, RosterCopy* copy) {
  auto start = Clock::now();
  JoinResult result;
  const std::string mine = self.to_json();
  store.set(arrived_key(self.rank), self.token);
  if (copy) copy->announce();  // before the claim: rank 0 publishes only after it

  if (self.rank == 0) {
    store.set("join/world_size", std::to_string(self.world_size));
  } else {
    // Rank 0 announces its world size before anyone can join its store, so this is immediate.
    try {
      auto theirs = store.get("join/world_size", deadline);
      if (theirs != std::to_string(self.world_size)) result.master_world_size = std::stoi(theirs);
    } catch (const StoreError& e) {
      if (e.error_class() != ErrorClass::timed_out) throw;
    } catch (const std::exception&) {
      result.master_world_size = -1;  // unreadable: still a mismatch worth reporting
    }
  }

  auto claimed = store.compare_set(rank_key(self.rank), "", mine);
  if (claimed != mine) {
    const auto holder = Identity::from_json(claimed);
    result.rank_taken_by = holder ? facts::JoinFacts::Claimant{holder->host, holder->pid}
                                  : facts::JoinFacts::Claimant{};
  }
  store.set(here_key(self.rank), self.token);
  if (!result.rank_taken_by) store.add(kCountKey, 1);

  if (self.rank == 0) {
    // Progress wake-ups: every `every`, at most half the time there is, at least 250 ms.
    Millis every = watch.every;
    auto total = std::chrono::duration_cast<Millis>(deadline - Clock::now());
    every = std::max(Millis{250}, std::min(every, total / 2));
    auto next_report = Clock::now() + every;
    auto report = [&](int r) {
      JoinProgress p;
      p.world_size = self.world_size;
      p.joined = static_cast<int>(store.add(kCountKey, 0));
      p.waiting_for = r;
      p.waiting_for_connected = store.check({arrived_key(r)});
      p.others_missing = std::max(0, self.world_size - p.joined - 1);
      p.waited_s = seconds_since(start);
      watch.on_progress(p);
    };
    // Wait for each rank in turn under the one deadline; whoever is absent at the end is missing.
    // Past the deadline the rest is not looked at one key at a time (a WORLD_SIZE of a million
    // with one rank present took 25 s more for that): join/count says how many of the ranks not
    // looked at yet have claimed; when none has, the rest are missing without a request, and a
    // search for the ones that have is bounded by kTailBudget.
    std::optional<int64_t> tail_joined;  // set at the deadline: claimed ranks not looked at yet
    const Deadline tail_stop = deadline + kTailBudget;
    for (int r = 0; r < self.world_size; ++r) {
      if (expired(deadline)) {
        if (!tail_joined)
          tail_joined = store.add(kCountKey, 0) - static_cast<int64_t>(result.present.size());
        if (*tail_joined <= 0 || expired(tail_stop)) {
          result.missing.push_back(r);
          continue;
        }
      }
      // Ranks that are all here already are read kJoinBatch at a time: one CHECK of their
      // here-keys and one MULTI_GET of their claims, not a CHECK and a GET a rank (at 16,384
      // ranks those round trips were most of rank 0's 22 s join, and past the deadline, behind a
      // rank that never came, the tail's budget ran out before it had looked at every rank that
      // had joined). A batch with a rank not here yet falls through to the rank-by-rank wait.
      if (self.world_size - r > 1) {
        const int end = static_cast<int>(std::min<int64_t>(self.world_size, int64_t{r} + kJoinBatch));
        std::vector<std::string> here_keys, rank_keys;
        for (int k = r; k < end; ++k) {
          here_keys.push_back(here_key(k));
          rank_keys.push_back(rank_key(k));
        }
        if (store.check(here_keys)) {
          auto claims = store.multi_get(rank_keys, deadline_after(Millis{1000}));
          for (const auto& text : claims)
            if (auto id = Identity::from_json(text)) result.present.push_back(*id);
          if (tail_joined) *tail_joined -= end - r;
          r = end - 1;
          continue;
        }
      }
      bool here = store.check({here_key(r)});
      if (here && tail_joined) --*tail_joined;
      while (!here && !expired(deadline)) {
        Deadline slice = watch.on_progress ? earliest(next_report, deadline) : deadline;
        try {
          store.wait({here_key(r)}, slice);
          here = true;
        } catch (const StoreError& e) {
          if (e.error_class() != ErrorClass::timed_out) throw;
        }
        if (!here && watch.on_progress && Clock::now() >= next_report && !expired(deadline)) {
          report(r);
          while (next_report <= Clock::now()) next_report += every;
        }
      }
      if (!here) {
        result.missing.push_back(r);
        continue;
      }
      auto id = Identity::from_json(store.get(rank_key(r), deadline_after(Millis{1000})));
      if (id) result.present.push_back(*id);
    }
    json roster = present_runs(result.present);
    roster["missing_ranges"] = rank_runs(result.missing);  // a million ranks, one absent: one pair
    const std::string text = roster.dump();
    store.set("join/roster", text);
    if (copy) copy->leave(store, text);
    result.roster_received = true;
  } else {
    try {
      const Deadline until = deadline + roster_grace;
      auto text = copy ? copy->read(store, "join/roster", until) : store.get("join/roster", until);
      auto roster = parse_bounded_or_discarded(text, kMaxStorePostJsonBytes);
      if (!roster.is_discarded()) {
        result.roster_received = true;
        result.missing = missing_of(roster, self.world_size);
        result.present = identities_of_runs(roster, self.world_size);
        for (auto& id : result.present)
          if (id.rank == self.rank) id = self;  // our own, whole
        // A roster from a version that listed every identity ("present": [objects]).
        auto present = roster.find("present");  // by reference: value() would copy it
        if (result.present.empty() && present != roster.end() && present->is_array())
          for (const auto& p : *present)
            if (auto id = identity_of(p)) result.present.push_back(std::move(*id));
      }
    } catch (const StoreError& e) {
      if (e.error_class() != ErrorClass::timed_out) throw;
    }
  }
  std::sort(result.present.begin(), result.present.end(),
            [](const Identity& a, const Identity& b) { return a.rank < b.rank; });
  result.waited_s = seconds_since(start);
  return result;
}

}  // namespace ncclsmoke::rendezvous
