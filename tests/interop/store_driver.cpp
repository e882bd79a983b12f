// Drives our TcpStore client from a test script: connects to --host/--port in --dialect, then reads
// one JSON array per stdin line (a command) and writes one JSON object per stdout line (its
// result), so the script can interleave our client's operations with a real PyTorch peer's.
//
//   store_driver --host 127.0.0.1 --port 29500 --dialect legacy [--timeout 10] [--op-timeout 5]
//                [--negotiate 1]   (probe the server's era instead of trusting --dialect)
//
// Values travel hex-encoded (binary-safe); keys are plain strings. Commands:
//   ["set", key, hex]                ["get", key, timeout_s]          ["add", key, delta]
//   ["check", [keys]]                ["wait", [keys], timeout_s]      ["delete", key]
//   ["compare_set", key, hex_expected, hex_desired]                   ["num_keys"]
//   ["append", key, hex]             ["multi_get", [keys], timeout_s]
//   ["multi_set", [keys], [hex...]]  ["join", world_size, timeout_s]  ["ping", nonce]
//   ["queue_push", key, hex]         ["queue_len", key]               ["list"]
//   ["probe"] (probe_dialect of the same endpoint again: the cached answer)
//   ["quit"]
// Reply: {"ok": true, "result": ..., "elapsed_s": s} or {"ok": false, "class": "timed_out",
// "error": "...", "elapsed_s": s}. The first line is the connect outcome.
#include <nlohmann/json.hpp>

#include <cstdlib>
#include <iostream>
#include <string>

#include "rendezvous/tcp_client.h"

using namespace ncclsmoke::rendezvous;
using nlohmann::json;

namespace {

std::string to_hex(const std::string& s) {
  static const char* digits = "0123456789abcdef";
  std::string out;
  for (unsigned char c : s) {
    out += digits[c >> 4];
    out += digits[c & 15];
  }
  return out;
}

std::string from_hex(const std::string& h) {
  if (h.size() % 2) throw std::invalid_argument("odd-length hex string");
  std::string out;
  for (std::size_t i = 0; i < h.size(); i += 2)
    out += static_cast<char>(std::stoi(h.substr(i, 2), nullptr, 16));
  return out;
}

Deadline after_seconds(double s) {
  return deadline_after(Millis(static_cast<long long>(s * 1000)));
}

json probe_json(const DialectProbe& p) {
  return {{"era", to_string(p.era)},
          {"era_text", p.era_text},
          {"dialect", ncclsmoke::rendezvous::wire::to_string(p.dialect)},
          {"ping", p.ping},
          {"cached", p.cached},
          {"probe_s", p.probe_s}};
}

json run(TcpStore& store, const json& cmd) {
  const std::string op = cmd.at(0).get<std::string>();
  if (op == "set") {
    store.set(cmd.at(1), from_hex(cmd.at(2)));
    return nullptr;
  }
  if (op == "get") return to_hex(store.get(cmd.at(1), after_seconds(cmd.at(2))));
  if (op == "add") return store.add(cmd.at(1), cmd.at(2).get<int64_t>());
  if (op == "check") return store.check(cmd.at(1).get<std::vector<std::string>>());
  if (op == "wait") {
    store.wait(cmd.at(1).get<std::vector<std::string>>(), after_seconds(cmd.at(2)));
    return nullptr;
  }
  if (op == "compare_set")
    return to_hex(store.compare_set(cmd.at(1), from_hex(cmd.at(2)), from_hex(cmd.at(3))));
  if (op == "delete") return store.delete_key(cmd.at(1));
  if (op == "num_keys") return store.num_keys();
  if (op == "append") {
    store.append(cmd.at(1), from_hex(cmd.at(2)));
    return nullptr;
  }
  if (op == "multi_get") {
    json out = json::array();
    for (const auto& v :
         store.multi_get(cmd.at(1).get<std::vector<std::string>>(), after_seconds(cmd.at(2))))
      out.push_back(to_hex(v));
    return out;
  }
  if (op == "multi_set") {
    std::vector<std::string> values;
    for (const auto& h : cmd.at(2)) values.push_back(from_hex(h));
    store.multi_set(cmd.at(1).get<std::vector<std::string>>(), values);
    return nullptr;
  }
  if (op == "join") return store.join_workers(cmd.at(1).get<int64_t>(), after_seconds(cmd.at(2)));
  if (op == "ping") return store.ping(cmd.at(1).get<uint32_t>());
  if (op == "queue_push") {
    store.queue_push(cmd.at(1), from_hex(cmd.at(2)));
    return nullptr;
  }
  if (op == "queue_len") return store.queue_len(cmd.at(1));
  if (op == "list") return store.list();
  if (op == "probe") {
    const auto& o = store.options();
    return probe_json(probe_dialect(o.host, o.port, after_seconds(5), o.backoff));
  }
  throw std::invalid_argument("unknown command " + op);
}

}  // namespace

int main(int argc, char** argv) {
  TcpStoreOptions opt;
  double timeout_s = 10, op_timeout_s = 5;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string flag = argv[i], value = argv[i + 1];
    if (flag == "--host") opt.host = value;
    else if (flag == "--port") opt.port = static_cast<uint16_t>(std::stoi(value));
    else if (flag == "--dialect")
      opt.dialect = value == "legacy" ? ncclsmoke::rendezvous::wire::Dialect::legacy
                                      : ncclsmoke::rendezvous::wire::Dialect::modern;
    else if (flag == "--timeout") timeout_s = std::stod(value);
    else if (flag == "--op-timeout") op_timeout_s = std::stod(value);
    else if (flag == "--negotiate") opt.negotiate = value == "1";
    else {
      std::cerr << "store_driver: unknown flag " << flag << "\n";
      return 2;
    }
  }
  opt.op_timeout = Millis(static_cast<long long>(op_timeout_s * 1000));

  std::unique_ptr<TcpStore> store;
  try {
    store = TcpStore::connect(opt, after_seconds(timeout_s));
  } catch (const StoreError& e) {
    std::cout << json{{"ok", false}, {"class", to_string(e.error_class())}, {"error", e.what()}}
              << std::endl;
    return 3;
  }
  const auto& rep = store->connect_report();
  json hello{{"ok", true},
             {"peer", rep.peer_address},
             {"local", rep.local_address},
             {"interface", rep.local_interface},
             {"rounds", rep.rounds},
             {"elapsed_s", rep.elapsed_s}};
  if (auto n = store->negotiation()) hello["negotiation"] = probe_json(*n);
  std::cout << hello << std::endl;

  std::string line;
  while (std::getline(std::cin, line)) {
    if (line.empty()) continue;
    auto start = Clock::now();
    json reply;
    try {
      json cmd = json::parse(line);
      if (cmd.at(0) == "quit") break;
      reply = {{"ok", true}, {"result", run(*store, cmd)}};
    } catch (const StoreError& e) {
      reply = {{"ok", false}, {"class", to_string(e.error_class())}, {"error", e.what()}};
    } catch (const std::exception& e) {
      reply = {{"ok", false}, {"class", "driver"}, {"error", e.what()}};
    }
    reply["elapsed_s"] = seconds_since(start);
    std::cout << reply << std::endl;
  }
  return 0;
}
