#pragma once
// Shared by the server's tests (server_test.cpp, store_budget_test.cpp, store_stranger_test.cpp,
// store_reserve_test.cpp): a sink that collects the server's log lines for assertions, a terse
// Request builder, and a fixture that starts a server on loopback.
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include <memory>

#include "rendezvous/tcp_server.h"
#include "rendezvous/wire.h"

namespace ncclsmoke::rendezvous::server_testing {

// Generous: the machine running the tests is small and shared.
inline constexpr std::chrono::seconds kIo{10};

// Collects the server's log lines for assertions.
class LogSink {
 public:
  std::function<void(const std::string&)> fn() {
    return [this](const std::string& line) {
      std::lock_guard lock(mu_);
      lines_.push_back(line);
      cv_.notify_all();
    };
  }
  // Waits for a line containing every needle; returns it (empty when none came in time).
  std::string wait_for(std::vector<std::string> needles, std::chrono::milliseconds budget = kIo) {
    std::unique_lock lock(mu_);
    std::string found;
    cv_.wait_for(lock, budget, [&] {
      for (const auto& l : lines_) {
        bool all = true;
        for (const auto& n : needles) all = all && l.find(n) != std::string::npos;
        if (all) {
          found = l;
          return true;
        }
      }
      return false;
    });
    return found;
  }
  std::size_t count() {
    std::lock_guard lock(mu_);
    return lines_.size();
  }
  std::string all() {
    std::lock_guard lock(mu_);
    std::string s;
    for (const auto& l : lines_) s += l + "\n";
    return s;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<std::string> lines_;
};

inline wire::Request req(wire::Op op, std::vector<std::string> keys = {}, std::vector<std::string> values = {},
            int64_t delta = 0, uint32_t u32 = 0) {
  wire::Request r;
  r.op = op;
  r.keys = std::move(keys);
  r.values = std::move(values);
  r.delta = delta;
  r.u32 = u32;
  return r;
}

// A server on 127.0.0.1 with its log collected: start() with the options a test changes.
class ServerFixture : public ::testing::Test {
 protected:
  void start(std::function<void(TcpStoreServerOptions&)> tweak) {
    TcpStoreServerOptions opt;
    opt.host = "127.0.0.1";
    opt.log = log_.fn();
    tweak(opt);
    server_ = TcpStoreServer::start(opt);
  }
  uint16_t port() const { return server_->port(); }

  LogSink log_;
  std::unique_ptr<TcpStoreServer> server_;
};

}  // namespace ncclsmoke::rendezvous::server_testing
