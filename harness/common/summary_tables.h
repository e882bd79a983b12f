#pragma once
// What a run prints at its end, after results/report/summary.h's human summary: what carried the
// bytes, a hint when there was no baseline to judge against, and the summary table.
//
// The summary table is the live rows' shape (harness/common/progress.h: nccl-tests' columns, one row
// per size, out-of-place and in-place side by side, unprefixed) over the world's rows of the
// verdict (each figure the mean over every rank, #wrong the sum), one table per transport, ending
// in nccl-tests' "# Avg bus bandwidth" line. --table-format csv and json give the same rows for
// scripts; stdout then holds the table alone (the human summary goes to stderr):
//
//   csv:  transport,ranks,size,count,type,redop,root,oop_time_us,oop_algbw_gbps,oop_busbw_gbps,
//         oop_wrong,ip_time_us,ip_algbw_gbps,ip_busbw_gbps,ip_wrong,gate  (a header row, then one
//         row per transport and size; an empty cell: not measured / not checked; gate names the
//         mode the headline gate number comes from, "out-of-place" or "in-place")
//   json: {"run_id": ..., "verdict": ..., "rows": [{"transport", "ranks", "size", "count",
//         "type", "redop", "root", "out_of_place": {"time_us", "algbw_gbps", "busbw_gbps",
//         "wrong"} | null, "in_place": {...} | null, "gate": "out-of-place" | "in-place" | null}]}
//         on one line.
//
// What carried the bytes (carried_lines), one line per transport, from its identities:
//   carried by:
//     socket  interface lo (127.0.0.1, chosen by the route to the store)
//     fabric  provider tcp;ofi_rxm, domain lo, libfabric 1.17
//             WARNING: tcp is the fabric transport's default: no --fabric-provider was asked for ...
//     nccl    network IB, plugin aws-ofi-nccl 1.13.2, ofi provider efa, GDR
// with a WARNING naming each environment variable that narrowed the choice (FI_PROVIDER for
// fabric, NCCL_NET / NCCL_NET_PLUGIN / NCCL_IB_DISABLE / ... for nccl, NCCL_SOCKET_IFNAME for
// socket), also for a transport that did not open (its phase's reason is then the line).
#include <optional>
#include <string>
#include <string_view>

#include "results/verdict/verdict.h"

namespace ncclsmoke::harness {

enum class TableFormat { text, csv, json };
inline constexpr const char* kTableFormatNames = "text, csv, json";
// "text", "csv", "json" (case-insensitive); nullopt otherwise.
std::optional<TableFormat> parse_table_format(std::string_view text);

// The world's rows of `v` (rank -1) as one table per transport; "" when there are none.
std::string summary_table(const results::Verdict& v, TableFormat format);

// "carried by:" and one line per transport the run asked for; "" when it asked for none.
std::string carried_lines(const results::Verdict& v);

// How to get a baseline, when a gate number had none to be judged against (and no
// BASELINE_MISSING finding already says so); "" otherwise.
std::string baseline_hint(const results::Verdict& v);

// The end of a run: human summary + carried_lines + baseline_hint + the table. Text tables: all
// on stdout (nothing with --quiet). csv/json: the table alone on stdout (also with --quiet: it was
// asked for), the human part on stderr. With --log-format json the human part is the log's
// (RunSession::log_verdict_json), so only a csv/json table is printed.
void print_run_summary(const results::Verdict& v, const std::string& table_format, bool quiet);

}  // namespace ncclsmoke::harness
