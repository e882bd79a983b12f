#pragma once
// The node-exporter textfile collector sink: DIR/ncclsmoke.prom, replaced atomically (temp file in
// DIR named ".ncclsmoke.prom.<pid>.<random>.tmp" — not *.prom, so the collector never reads it —
// fsync, rename, fsync of DIR), so a scrape sees the previous run's metrics or this run's, never
// half a file.
#include <string>

namespace ncclsmoke::cronjob {

inline constexpr const char* kTextfileName = "ncclsmoke.prom";

// DIR/ncclsmoke.prom.
std::string textfile_path(const std::string& dir);

// Writes `text` to textfile_path(dir); throws results::WriteError naming the path and the reason.
// Returns the path written.
std::string write_textfile(const std::string& dir, const std::string& text);

// The current content of textfile_path(dir); "" when absent or unreadable.
std::string read_textfile(const std::string& dir);

}  // namespace ncclsmoke::cronjob
