// store_server: our TCPStore server alone, for the benchmarks. Same server as `ncclsmoke store
// serve`, but linked only against rendezvous/, so the store benchmark runs while other modules
// are being rebuilt. Prints "store_server listening on port N" and serves until SIGINT/SIGTERM
// or --duration.
#include <CLI/CLI.hpp>
#include <atomic>
#include <csignal>
#include <iostream>
#include <thread>

#include "rendezvous/deadline.h"
#include "rendezvous/tcp_server.h"

namespace {
std::atomic<bool> g_stop{false};
void on_signal(int) { g_stop = true; }
}  // namespace

int main(int argc, char** argv) {
  using namespace ncclsmoke::rendezvous;
  std::string host = "127.0.0.1";
  int port = 0;
  double duration_s = 0;
  CLI::App app{"store_server: our TCPStore-compatible server, for the store benchmarks"};
  app.add_option("--host", host, "Address to bind")->capture_default_str();
  app.add_option("--port", port, "Port; 0 picks a free one")->check(CLI::Range(0, 65535));
  app.add_option("--duration", duration_s, "Seconds to serve (default: until a signal)")
      ->check(CLI::NonNegativeNumber);
  CLI11_PARSE(app, argc, argv);
  try {
    TcpStoreServerOptions opt;
    opt.host = host;
    opt.port = static_cast<uint16_t>(port);
    auto server = TcpStoreServer::start(opt);
    std::cout << "store_server listening on port " << server->port() << std::endl;
    std::signal(SIGINT, on_signal);
    std::signal(SIGTERM, on_signal);
    auto until = duration_s > 0 ? deadline_after(Millis(static_cast<long long>(duration_s * 1000)))
                                : Deadline::max();
    while (!g_stop && !expired(until)) std::this_thread::sleep_for(Millis(50));
    server->stop();
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "store_server: error: " << e.what() << "\n";
    return 1;
  }
}
