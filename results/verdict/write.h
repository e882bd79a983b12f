#pragma once
// Writing a verdict so that a reader (the CronJob wrapper, a gate, a human) never sees half a file:
// temp file in the same directory, fsync, rename over the target, fsync the directory.
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>

namespace ncclsmoke::results {

class WriteError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Pretty-printed JSON plus a trailing newline. Invalid UTF-8 in strings is replaced (U+FFFD), so
// an odd byte in an environment value cannot cost the verdict. Throws WriteError naming the path
// and the reason (directory missing, not a directory, read-only, disk full ...); no temp file is
// left behind on failure.
void write_json_atomically(const std::string& path, const nlohmann::json& doc);

// The same for any text (used for the JSON, and available for other reports).
void write_text_atomically(const std::string& path, const std::string& text);

}  // namespace ncclsmoke::results
