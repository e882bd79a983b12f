#include "cronjob/textfile.h"

#include <filesystem>
#include <fstream>
#include <sstream>

#include "results/verdict/write.h"

namespace ncclsmoke::cronjob {

std::string textfile_path(const std::string& dir) {
  return (std::filesystem::path(dir.empty() ? "." : dir) / kTextfileName).string();
}

std::string write_textfile(const std::string& dir, const std::string& text) {
  std::string path = textfile_path(dir);
  results::write_text_atomically(path, text);
  return path;
}

std::string read_textfile(const std::string& dir) {
  std::ifstream in(textfile_path(dir), std::ios::binary);
  if (!in) return "";
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

}  // namespace ncclsmoke::cronjob
