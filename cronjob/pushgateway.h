#pragma once
// Delivering metrics to a Prometheus Pushgateway over HTTP (libcurl).
//
// Method: POST to <url>/metrics/job/<job>/<label>/<value>... — POST replaces only the metric
// families present in the body within that group, so a family a run does not send (e.g.
// ncclsmoke_last_success_timestamp_seconds after a failed run) keeps its previous value. PUT would
// drop it and the "stale" alert would fire after every failure.
//
// Grouping values are URL-escaped; a value containing '/' (or empty) is sent in the Pushgateway's
// base64url form (`<label>@base64/<value>`), which it decodes back to the original value.
//
// Deadlines and retries: each attempt has a connect and a total timeout of `timeout_s`; failed
// attempts (connection errors, timeouts, HTTP 408/429/5xx) are retried up to `retries` more times
// after a jittered exponential backoff (base × 2^k × [0.5, 1.5), capped). Other HTTP errors (4xx:
// the Pushgateway rejected the body) are not retried — repeating the same body cannot help.
// Worst case wall time ≈ (retries + 1) × timeout_s + Σ backoff.
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace ncclsmoke::cronjob {

struct PushOptions {
  std::string url;                 // base, e.g. http://pushgateway.monitoring:9091 (http/https)
  std::string job = "ncclsmoke";
  std::vector<std::pair<std::string, std::string>> grouping;  // after job, in this order
  double timeout_s = 10;           // per attempt (connect and total)
  int retries = 3;                 // extra attempts after the first
  double backoff_base_s = 0.5;
  double backoff_cap_s = 8;
};

struct PushResult {
  bool ok = false;
  std::string url;                 // the full grouping URL pushed to
  int attempts = 0;
  double elapsed_s = 0;            // wall time of all attempts and waits
  double waited_s = 0;             // of which backoff sleeps
  long http_status = 0;            // last HTTP status; 0: no HTTP response
  std::string error;               // last failure, one line ("" when ok)
  // One line for an operator: what was pushed where, or why it was not.
  std::string describe() const;
};

// Thrown for a base URL that cannot be pushed to (not http/https, empty, a query string).
class PushUrlError : public std::invalid_argument {
 public:
  using std::invalid_argument::invalid_argument;
};

// The grouping URL; throws PushUrlError for a bad base URL or empty job.
std::string grouping_url(const PushOptions& options);

// POSTs `body` (text format 0.0.4). Never throws for network problems: they are in the result.
PushResult push_metrics(const PushOptions& options, const std::string& body);

}  // namespace ncclsmoke::cronjob
