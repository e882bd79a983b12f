// `ncclsmoke store serve` runs a standalone TCPStore-compatible server;
// `ncclsmoke store check` connects to one (ours or torch's) and runs a short self-check;
// `ncclsmoke store selftest` does both in one process on loopback.
#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <atomic>
#include <chrono>
#include <cmath>
#include <csignal>
#include <iostream>
#include <thread>

#include "harness/cli/commands.h"
#include "harness/common/cli_util.h"
#include "harness/common/log.h"
#include "rendezvous/tcp_client.h"
#include "rendezvous/tcp_server.h"
#include "transports/options.h"  // size_text

namespace ncclsmoke::harness {
namespace {

using namespace ncclsmoke::rendezvous;

std::atomic<bool> g_stop{false};
void on_signal(int) { g_stop = true; }

struct ServeFlags {
  std::string host;
  int port = 29500;
  std::size_t max_key_bytes = wire::Limits{}.max_key_bytes;
  std::size_t max_value_bytes = wire::Limits{}.max_value_bytes;
  // The memory budget (rendezvous/tcp_server.h documents each limit and its default).
  std::size_t max_total_bytes = TcpStoreServerOptions{}.max_total_bytes;
  std::size_t max_keys = TcpStoreServerOptions{}.max_stored_keys;
  std::size_t max_output_bytes = TcpStoreServerOptions{}.max_output_bytes;
  double request_timeout_s =
      std::chrono::duration<double>(TcpStoreServerOptions{}.stalled_request_timeout).count();
  std::size_t max_pending_keys = TcpStoreServerOptions{}.max_pending_keys;
  std::size_t max_connections = TcpStoreServerOptions{}.max_connections;
  std::size_t reserved_connections = TcpStoreServerOptions{}.reserved_connections;
  // The job's reserve of keys and bytes (rendezvous/tcp_server_reserve.h), in ranks: the flag,
  // else --reserved-connections when given, else kDefaultReservedRanks.
  std::size_t reserved_ranks = 0;
  double idle_timeout_s =
      std::chrono::duration<double>(TcpStoreServerOptions{}.idle_timeout).count();
  double duration_s = 0;  // 0 = until SIGINT/SIGTERM
};

// A store served apart from the job does not know its world size: room for a 64-rank job
// (4096 keys, 16 MiB), well under 1% of the default limits.
constexpr std::size_t kDefaultReservedRanks = 64;

struct CheckFlags {
  std::string host = "127.0.0.1";
  int port = 29500;
  std::string dialect = "modern";
  double timeout_s = 10;
};

// SECONDS in [0.001, 86400].
CLI::Validator timeout_check() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        double v = 0;
        try {
          v = std::stod(text);
        } catch (const std::exception&) {
          return "not a number: " + text;
        }
        if (!std::isfinite(v) || v < 0.001 || v > 86400)
          return "must be a finite number of seconds in [0.001, 86400], got " + text;
        return "";
      },
      "SECONDS in [0.001, 86400]");
}

std::chrono::milliseconds to_ms(double seconds) {
  return std::max(std::chrono::milliseconds(static_cast<long long>(std::llround(seconds * 1000))),
                  std::chrono::milliseconds(1));
}

wire::Dialect parse_dialect(const std::string& s) {
  return s == "legacy" ? wire::Dialect::legacy : wire::Dialect::modern;
}

// Runs set/get/add/check/wait/compare_set/delete/num_keys against a server and prints one line
// per step. Returns 0 when every step gave the expected answer.
int run_check(const std::string& host, int port, wire::Dialect dialect, double timeout_s) {
  TcpStoreOptions opt;
  opt.host = host;
  opt.port = static_cast<uint16_t>(port);
  opt.dialect = dialect;
  auto budget = std::chrono::milliseconds(static_cast<long long>(timeout_s * 1000));
  auto deadline = deadline_after(budget);
  auto start = Clock::now();
  auto store = TcpStore::connect(opt, deadline);
  const auto& rep = store->connect_report();
  std::cout << "connected to " << rep.peer_address << " from " << rep.local_address
            << (rep.local_interface.empty() ? "" : " (" + rep.local_interface + ")") << " in "
            << rep.elapsed_s << "s, dialect " << wire::to_string(dialect) << "\n";

  int failures = 0;
  auto expect = [&](const char* step, bool ok, const std::string& detail = "") {
    std::cout << (ok ? "  ok    " : "  FAIL  ") << step << (detail.empty() ? "" : ": " + detail)
              << "\n";
    if (!ok) ++failures;
  };
  std::string key = "ncclsmoke/selfcheck/" + std::to_string(::getpid());
  store->set(key, "v1");
  expect("set+get", store->get(key, deadline) == "v1");
  int64_t a = store->add(key + "/n", 2);
  int64_t b = store->add(key + "/n", 3);
  expect("add", a == 2 && b == 5, std::to_string(a) + ", " + std::to_string(b));
  expect("check", store->check({key}) && !store->check({key + "/missing"}));
  store->wait({key}, deadline);
  expect("wait (present)", true);
  auto short_deadline = deadline_after(std::chrono::milliseconds(200));
  bool timed_out = false;
  try {
    store->wait({key + "/never"}, short_deadline);
  } catch (const StoreError& e) {
    timed_out = e.error_class() == ErrorClass::timed_out;
  }
  expect("wait (times out)", timed_out);
  expect("compare_set", store->compare_set(key, "v1", "v2") == "v2");
  expect("num_keys", store->num_keys() >= 2);
  expect("delete_key", store->delete_key(key) && !store->check({key}));
  store->delete_key(key + "/n");
  std::cout << (failures ? "self-check FAILED" : "self-check passed") << " in "
            << seconds_since(start) << "s\n";
  return failures ? kExitFail : kExitPass;
}

}  // namespace

void register_store_command(CLI::App& app, Action& action) {
  auto* store = app.add_subcommand("store", "Run or check a TCPStore-compatible rendezvous store");
  store->require_subcommand(1);

  auto serve_flags = std::make_shared<ServeFlags>();
  auto* serve = store->add_subcommand(
      "serve", "Serve a store that PyTorch's TCPStore clients (1.13 and 2.x) can join");
  serve->add_option("--host", serve_flags->host,
                    "Address to bind (default: every address, IPv6 dual-stack)");
  serve->add_option("--port", serve_flags->port, "Port; 0 picks a free one and prints it")
      ->check(CLI::Range(0, 65535));
  serve->add_option("--max-key-bytes", serve_flags->max_key_bytes, "Largest key accepted")
      ->check(CLI::Range(std::size_t{1}, std::size_t{1} << 20));
  serve->add_option("--max-value-bytes", serve_flags->max_value_bytes, "Largest value accepted")
      ->check(CLI::Range(std::size_t{1}, std::size_t{1} << 30));
  serve->add_option("--max-total-bytes", serve_flags->max_total_bytes,
                    "Memory budget for stored keys and values + buffered requests + queued "
                    "replies; a request that would exceed it closes its connection (size, e.g. "
                    "8G, 512M; the size grammar of run's --max-bytes)")
      ->transform(size_value(std::uint64_t{1} << 20, std::uint64_t{1} << 50))
      ->type_name("SIZE")
      ->default_str(transports::size_text(serve_flags->max_total_bytes));
  serve->add_option("--max-keys", serve_flags->max_keys,
                    "Most keys (and queues) stored; a request creating one more closes its "
                    "connection")
      ->check(CLI::Range(std::size_t{1}, std::size_t{1} << 32))
      ->capture_default_str();
  serve->add_option("--max-output-bytes", serve_flags->max_output_bytes,
                    "Per connection: replies and notifications queued for a client that does not "
                    "read; over it the client is dropped (size, e.g. 64M)")
      ->transform(size_value(4096, std::uint64_t{1} << 40))
      ->type_name("SIZE")
      ->default_str(transports::size_text(serve_flags->max_output_bytes));
  serve->add_option("--request-timeout", serve_flags->request_timeout_s,
                    "Seconds a request may take from its first byte to its last; a slower one "
                    "closes its connection")
      ->check(timeout_check())
      ->capture_default_str();
  serve->add_option("--max-pending-keys", serve_flags->max_pending_keys,
                    "Per connection: keys it may WAIT on (missing keys of its pending WAIT) and "
                    "WATCH at once; over it the connection is closed")
      ->check(CLI::Range(std::size_t{1}, std::size_t{1} << 32))
      ->capture_default_str();
  serve->add_option("--max-connections", serve_flags->max_connections,
                    "Most connections open; when full, the oldest one that never completed a "
                    "request is shed before a new one is refused")
      ->check(CLI::Range(std::size_t{2}, std::size_t{1} << 24))
      ->capture_default_str();
  auto* reserved_connections =
      serve->add_option("--reserved-connections", serve_flags->reserved_connections,
                        "Of --max-connections, slots that connections which never completed a "
                        "request cannot take (set it to the job's world size; at most half)")
          ->check(CLI::Range(std::size_t{0}, std::size_t{1} << 24))
          ->capture_default_str();
  auto* reserved_ranks =
      serve->add_option(
               "--reserved-ranks", serve_flags->reserved_ranks,
               "Keys and bytes kept for the job: 64 keys and 256 KiB per rank (at most half of "
               "--max-keys and --max-total-bytes) that only connections which claimed a rank "
               "(ncclsmoke run's join) may take; others' keys are refused short of them. 0: none "
               "(default: --reserved-connections when given, else 64)")
          ->check(CLI::Range(std::size_t{0}, std::size_t{1} << 24));
  serve->add_option("--idle-timeout", serve_flags->idle_timeout_s,
                    "Seconds a connection may stay open without completing a request (torch "
                    "1.13's WATCH_KEY socket is kept while its main connection vouches for it)")
      ->check(timeout_check())
      ->capture_default_str();
  serve->add_option("--duration", serve_flags->duration_s,
                    "Seconds to serve before exiting (default: until SIGINT/SIGTERM)")
      ->check(seconds_check(true));
  serve->callback([serve_flags, reserved_connections, reserved_ranks, &action] {
    if (reserved_ranks->count() == 0)
      serve_flags->reserved_ranks = reserved_connections->count() > 0
                                        ? serve_flags->reserved_connections
                                        : kDefaultReservedRanks;
    action = [serve_flags] {
      TcpStoreServerOptions opt;
      opt.host = serve_flags->host;
      opt.port = static_cast<uint16_t>(serve_flags->port);
      opt.limits.max_key_bytes = serve_flags->max_key_bytes;
      opt.limits.max_value_bytes = serve_flags->max_value_bytes;
      opt.max_total_bytes = serve_flags->max_total_bytes;
      opt.max_stored_keys = serve_flags->max_keys;
      opt.max_output_bytes = serve_flags->max_output_bytes;
      opt.stalled_request_timeout = to_ms(serve_flags->request_timeout_s);
      opt.max_pending_keys = serve_flags->max_pending_keys;
      opt.max_connections = serve_flags->max_connections;
      opt.reserved_connections = serve_flags->reserved_connections;
      opt.reserved_ranks = serve_flags->reserved_ranks;
      opt.idle_timeout = to_ms(serve_flags->idle_timeout_s);
      opt.log = [](const std::string& line) { log_warn(line); };  // through the one logger
      auto server = TcpStoreServer::start(opt);
      std::cout << "ncclsmoke store listening on port " << server->port();
      for (const auto& a : server->listen_addresses()) std::cout << " " << a;
      std::cout << std::endl;
      {
        auto st = server->stats();
        if (st.reserved_keys > 0 || st.reserved_bytes > 0)
          log_info(fmt::format("store: {} keys and {} bytes reserved for the job's claimed ranks "
                               "(--reserved-ranks {})",
                               st.reserved_keys, st.reserved_bytes, serve_flags->reserved_ranks));
      }
      std::signal(SIGINT, on_signal);
      std::signal(SIGTERM, on_signal);
      auto until = serve_flags->duration_s > 0
                       ? deadline_after(std::chrono::milliseconds(
                             static_cast<long long>(serve_flags->duration_s * 1000)))
                       : Deadline::max();
      while (!g_stop && !expired(until)) std::this_thread::sleep_for(std::chrono::milliseconds(50));
      auto st = server->stats();
      server->stop();
      // One summary line (bench/store_stranger_bench.py reads the longest turn from it).
      log_info(fmt::format("store: served {} requests on {} connections; closed {} for limits "
                           "({} idle, {} shed); longest event-loop turn {:.1f} ms; {} "
                           "connection(s) claimed a rank, holding {} keys",
                           st.requests, st.accepted, st.closed_for_limits, st.closed_idle,
                           st.shed_idle, static_cast<double>(st.longest_turn_us) / 1000.0,
                           st.job_connections, st.job_keys));
      for (const auto& f : st.full)
        log_info(fmt::format("store: full: {} ({}) {} refused {} time(s), last at {} in use, "
                             "last peer {}",
                             f.limit, f.flag, f.value, f.refusals, f.in_use, f.last_peer));
      return kExitPass;
    };
  });

  auto check_flags = std::make_shared<CheckFlags>();
  auto* check = store->add_subcommand("check", "Connect to a store and run a short self-check");
  check->add_option("--host", check_flags->host, "Store host")->capture_default_str();
  check->add_option("--port", check_flags->port, "Store port")
      ->check(CLI::Range(1, 65535))
      ->capture_default_str();
  check->add_option("--dialect", check_flags->dialect,
                    "Wire dialect of the server: legacy (torch <= 2.0) or modern (torch >= 2.1)")
      ->check(CLI::IsMember({"legacy", "modern"}))
      ->capture_default_str();
  check->add_option("--timeout", check_flags->timeout_s, "Seconds for the whole check")
      ->check(seconds_check(false))
      ->capture_default_str();
  check->callback([check_flags, &action] {
    action = [check_flags] {
      return run_check(check_flags->host, check_flags->port, parse_dialect(check_flags->dialect),
                       check_flags->timeout_s);
    };
  });

  auto* selftest = store->add_subcommand(
      "selftest", "Start a server on a free loopback port and check it in both dialects");
  selftest->callback([&action] {
    action = [] {
      TcpStoreServerOptions opt;
      opt.host = "127.0.0.1";
      auto server = TcpStoreServer::start(opt);
      std::cout << "store listening on 127.0.0.1:" << server->port() << "\n";
      int rc = run_check("127.0.0.1", server->port(), wire::Dialect::legacy, 10);
      rc = std::max(rc, run_check("127.0.0.1", server->port(), wire::Dialect::modern, 10));
      server->stop();
      return rc;
    };
  });
}

}  // namespace ncclsmoke::harness
