#include "results/verdict/write.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "results/verdict/verdict.h"
#include "tests/results/sample.h"

namespace ncclsmoke::results {
namespace {

namespace fs = std::filesystem;

class AtomicWrite : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/ncclsmoke_write_XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override {
    std::error_code ec;
    fs::permissions(dir_, fs::perms::owner_all, ec);
    fs::remove_all(dir_, ec);
  }
  std::string read(const fs::path& p) {
    std::ifstream in(p);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  }
  size_t entries() {
    return std::distance(fs::directory_iterator(dir_), fs::directory_iterator{});
  }
  fs::path dir_;
};

TEST_F(AtomicWrite, WritesCompleteDocumentAndLeavesNoTemp) {
  const fs::path target = dir_ / "verdict.json";
  nlohmann::json doc = to_json(testing::full_sample());
  write_json_atomically(target.string(), doc);
  std::string text = read(target);
  ASSERT_FALSE(text.empty());
  EXPECT_EQ(text.back(), '\n');
  EXPECT_EQ(nlohmann::json::parse(text), doc);
  EXPECT_EQ(entries(), 1u);

  // Replacing keeps one file with the new content.
  doc["run_id"] = "second";
  write_json_atomically(target.string(), doc);
  EXPECT_EQ(nlohmann::json::parse(read(target))["run_id"], "second");
  EXPECT_EQ(entries(), 1u);
}

TEST_F(AtomicWrite, LargeDocumentIsWrittenWhole) {
  nlohmann::json doc = nlohmann::json::array();
  for (int i = 0; i < 20000; ++i) doc.push_back({{"i", i}, {"pad", std::string(64, 'x')}});
  const fs::path target = dir_ / "big.json";
  write_json_atomically(target.string(), doc);
  EXPECT_EQ(nlohmann::json::parse(read(target)).size(), 20000u);
  EXPECT_EQ(entries(), 1u);
}

TEST_F(AtomicWrite, InvalidUtf8DoesNotCostTheVerdict) {
  nlohmann::json doc = {{"env", {{"NCCL_X", std::string("bad\xff\xfe")}}}};
  const fs::path target = dir_ / "v.json";
  ASSERT_NO_THROW(write_json_atomically(target.string(), doc));
  auto back = nlohmann::json::parse(read(target));
  EXPECT_EQ(back["env"]["NCCL_X"].get<std::string>().substr(0, 3), "bad");
}

TEST_F(AtomicWrite, MissingDirectoryIsNamed) {
  const std::string target = (dir_ / "no" / "such" / "verdict.json").string();
  try {
    write_json_atomically(target, nlohmann::json::object());
    FAIL() << "expected WriteError";
  } catch (const WriteError& e) {
    std::string what = e.what();
    EXPECT_NE(what.find(target), std::string::npos) << what;
    EXPECT_NE(what.find("does not exist"), std::string::npos) << what;
    EXPECT_NE(what.find((dir_ / "no" / "such").string()), std::string::npos) << what;
  }
  EXPECT_EQ(entries(), 0u);
}

TEST_F(AtomicWrite, ParentIsAFile) {
  std::ofstream(dir_ / "plain") << "x";
  const std::string target = (dir_ / "plain" / "verdict.json").string();
  try {
    write_json_atomically(target, nlohmann::json::object());
    FAIL() << "expected WriteError";
  } catch (const WriteError& e) {
    std::string what = e.what();
    EXPECT_NE(what.find(target), std::string::npos) << what;
    EXPECT_NE(what.find("not a directory"), std::string::npos) << what;
  }
}

TEST_F(AtomicWrite, TargetIsADirectory) {
  fs::create_directory(dir_ / "sub");
  EXPECT_THROW(write_json_atomically((dir_ / "sub").string(), nlohmann::json::object()),
               WriteError);
  EXPECT_THROW(write_json_atomically((dir_ / "sub").string() + "/", nlohmann::json::object()),
               WriteError);
  EXPECT_EQ(entries(), 1u);  // only "sub": no temp file left
  EXPECT_TRUE(fs::is_empty(dir_ / "sub"));
}

TEST_F(AtomicWrite, ReadOnlyDirectoryIsNamed) {
  if (::geteuid() == 0) GTEST_SKIP() << "root ignores directory permissions";
  fs::permissions(dir_, fs::perms::owner_read | fs::perms::owner_exec);
  const std::string target = (dir_ / "verdict.json").string();
  try {
    write_json_atomically(target, nlohmann::json::object());
    FAIL() << "expected WriteError";
  } catch (const WriteError& e) {
    std::string what = e.what();
    EXPECT_NE(what.find(target), std::string::npos) << what;
    EXPECT_NE(what.find("not writable"), std::string::npos) << what;
  }
}

TEST_F(AtomicWrite, RelativePathUsesCurrentDirectory) {
  fs::path old = fs::current_path();
  fs::current_path(dir_);
  write_json_atomically("rel.json", nlohmann::json{{"a", 1}});
  fs::current_path(old);
  EXPECT_EQ(nlohmann::json::parse(read(dir_ / "rel.json"))["a"], 1);
}

}  // namespace
}  // namespace ncclsmoke::results
