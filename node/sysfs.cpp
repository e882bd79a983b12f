#include "node/sysfs.h"

#include <algorithm>
#include <charconv>
#include <filesystem>
#include <fstream>

namespace ncclsmoke::node {

namespace fs = std::filesystem;

std::string sysfs_root(const std::optional<std::string>& configured) {
  return configured && !configured->empty() ? *configured : std::string(kSysfsDefault);
}
std::string rdma_class_dir(const std::string& root) { return root + "/class/infiniband"; }
std::string net_class_dir(const std::string& root) { return root + "/class/net"; }

namespace {

std::vector<std::string> sorted_entries(const std::string& dir, bool directories) {
  std::vector<std::string> out;
  std::error_code ec;
  fs::directory_iterator it(dir, ec), end;
  for (; !ec && it != end; it.increment(ec)) {
    std::error_code ec2;
    const bool wanted = directories ? fs::is_directory(it->path(), ec2)
                                    : fs::is_regular_file(it->path(), ec2);
    if (wanted) out.push_back(it->path().filename().string());
  }
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace

std::vector<std::string> sorted_subdirs(const std::string& dir) { return sorted_entries(dir, true); }
std::vector<std::string> sorted_files(const std::string& dir) { return sorted_entries(dir, false); }

std::optional<std::string> read_line(const std::string& path) {
  std::ifstream in(path);
  if (!in) return std::nullopt;
  char buf[256];
  in.read(buf, sizeof buf);
  if (in.bad()) return std::nullopt;
  std::string text(buf, static_cast<std::size_t>(in.gcount()));
  if (auto nl = text.find('\n'); nl != std::string::npos) text.resize(nl);
  while (!text.empty() && (text.back() == ' ' || text.back() == '\r' || text.back() == '\t'))
    text.pop_back();
  return text;
}

std::optional<std::uint64_t> read_count(const std::string& path) {
  auto text = read_line(path);
  if (!text || text->empty()) return std::nullopt;
  std::uint64_t v = 0;
  auto [end, ec] = std::from_chars(text->data(), text->data() + text->size(), v);
  if (ec != std::errc() || end != text->data() + text->size()) return std::nullopt;
  return v;
}

std::optional<long long> read_signed(const std::string& path) {
  auto text = read_line(path);
  if (!text || text->empty()) return std::nullopt;
  long long v = 0;
  auto [end, ec] = std::from_chars(text->data(), text->data() + text->size(), v);
  if (ec != std::errc() || end != text->data() + text->size()) return std::nullopt;
  return v;
}

std::optional<double> parse_port_rate(const std::string& text) {
  // "<N>[.5] Gb/sec ...": a whole number of Gb/s, or one and a half.
  std::size_t i = 0;
  while (i < text.size() && text[i] >= '0' && text[i] <= '9') ++i;
  if (i == 0 || i > 6) return std::nullopt;
  double gbps = 0;
  std::from_chars(text.data(), text.data() + i, gbps);
  if (text.compare(i, 2, ".5") == 0) {
    gbps += 0.5;
    i += 2;
  }
  if (text.compare(i, 7, " Gb/sec") != 0 || gbps <= 0) return std::nullopt;
  return gbps;
}

}  // namespace ncclsmoke::node
