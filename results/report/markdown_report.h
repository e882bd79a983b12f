#pragma once
// The regression report as a short Markdown summary for a chat message or a ticket: counts by
// verdict over the window, then per cluster ("### Cluster NAME"): its regression incidents, newest
// first (at most `max_regressions` per cluster, with how many more the HTML page lists), and where
// each (profile, transport) stands now with its ratio to the baseline. Strings from the history are escaped (escape.h).
#include <cstddef>
#include <string>

#include "results/report/model.h"

namespace ncclsmoke::report {

std::string render_markdown(const ReportModel& m, std::size_t max_regressions = 5);

}  // namespace ncclsmoke::report
