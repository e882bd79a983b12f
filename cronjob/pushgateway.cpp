#include "cronjob/pushgateway.h"

#include "rendezvous/deadline.h"

#include <curl/curl.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <random>
#include <thread>

namespace ncclsmoke::cronjob {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

void global_init() {
  static std::once_flag once;
  std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
}

std::string base64url(const std::string& in) {
  static const char* abc = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
  std::string out;
  std::size_t i = 0;
  for (; i + 2 < in.size(); i += 3) {
    unsigned n = (static_cast<unsigned char>(in[i]) << 16) |
                 (static_cast<unsigned char>(in[i + 1]) << 8) | static_cast<unsigned char>(in[i + 2]);
    out += abc[(n >> 18) & 63];
    out += abc[(n >> 12) & 63];
    out += abc[(n >> 6) & 63];
    out += abc[n & 63];
  }
  if (i + 1 == in.size()) {
    unsigned n = static_cast<unsigned char>(in[i]) << 16;
    out += abc[(n >> 18) & 63];
    out += abc[(n >> 12) & 63];
    out += "==";
  } else if (i + 2 == in.size()) {
    unsigned n = (static_cast<unsigned char>(in[i]) << 16) | (static_cast<unsigned char>(in[i + 1]) << 8);
    out += abc[(n >> 18) & 63];
    out += abc[(n >> 12) & 63];
    out += abc[(n >> 6) & 63];
    out += '=';
  }
  return out;
}

std::string escape_segment(const std::string& s) {
  char* e = curl_easy_escape(nullptr, s.c_str(), static_cast<int>(s.size()));
  if (!e) throw std::bad_alloc();
  std::string out(e);
  curl_free(e);
  return out;
}

// "/<name>/<value>" or "/<name>@base64/<value>" (for '/' or an empty value).
std::string segment(const std::string& name, const std::string& value) {
  if (value.empty() || value.find('/') != std::string::npos)
    return "/" + name + "@base64/" + (value.empty() ? std::string("=") : base64url(value));
  return "/" + name + "/" + escape_segment(value);
}

size_t collect(char* data, size_t size, size_t n, void* user) {
  auto* s = static_cast<std::string*>(user);
  size_t len = size * n;
  if (s->size() < 4096) s->append(data, std::min(len, 4096 - s->size()));
  return len;
}

// The first line of a response body, trimmed, for an error message.
std::string first_line(const std::string& body) {
  std::string line = body.substr(0, body.find('\n'));
  while (!line.empty() && (line.back() == '\r' || line.back() == ' ')) line.pop_back();
  if (line.size() > 300) line = line.substr(0, 300) + "...";
  return line;
}

bool retryable_status(long status) { return status == 408 || status == 429 || status >= 500; }

using rendezvous::seconds_text;

}  // namespace

std::string grouping_url(const PushOptions& o) {
  std::string base = o.url;
  if (base.rfind("http://", 0) != 0 && base.rfind("https://", 0) != 0)
    throw PushUrlError("pushgateway URL '" + o.url + "' must start with http:// or https://");
  if (base.find_first_of("?# \t\n") != std::string::npos)
    throw PushUrlError("pushgateway URL '" + o.url +
                       "' must be a base URL without query, fragment or spaces");
  while (!base.empty() && base.back() == '/') base.pop_back();
  std::size_t host_start = base.find("://") + 3;
  if (base.size() <= host_start) throw PushUrlError("pushgateway URL '" + o.url + "' has no host");
  if (o.job.empty()) throw PushUrlError("pushgateway job name is empty");
  std::string url = base + "/metrics" + segment("job", o.job);
  for (const auto& [k, v] : o.grouping) url += segment(k, v);
  return url;
}

std::string PushResult::describe() const {
  if (ok)
    return "pushed metrics to " + url + " (HTTP " + std::to_string(http_status) + ", attempt " +
           std::to_string(attempts) + ", " + seconds_text(elapsed_s) + ")";
  return "could not push metrics to " + url + " after " + std::to_string(attempts) + " attempt" +
         (attempts == 1 ? "" : "s") + " in " + seconds_text(elapsed_s) + " (" + seconds_text(waited_s) +
         " waiting between attempts): " + error;
}

PushResult push_metrics(const PushOptions& o, const std::string& body) {
  global_init();
  PushResult r;
  r.url = grouping_url(o);
  const auto start = Clock::now();
  std::mt19937_64 rng{std::random_device{}()};
  std::uniform_real_distribution<double> jitter(0.5, 1.5);
  const long timeout_ms = std::max(1L, static_cast<long>(o.timeout_s * 1000));
  const int max_attempts = 1 + std::max(0, o.retries);

  for (int attempt = 1; attempt <= max_attempts; ++attempt) {
    if (attempt > 1) {
      double wait = std::min(o.backoff_cap_s, o.backoff_base_s * double(1 << std::min(attempt - 2, 20))) *
                    jitter(rng);
      std::this_thread::sleep_for(std::chrono::duration<double>(wait));
      r.waited_s += wait;
    }
    r.attempts = attempt;
    CURL* curl = curl_easy_init();
    if (!curl) {
      r.error = "curl_easy_init failed";
      break;
    }
    std::string response;
    char errbuf[CURL_ERROR_SIZE] = {0};
    curl_slist* headers =
        curl_slist_append(nullptr, "Content-Type: text/plain; version=0.0.4; charset=utf-8");
    curl_easy_setopt(curl, CURLOPT_URL, r.url.c_str());
    curl_easy_setopt(curl, CURLOPT_POST, 1L);
    curl_easy_setopt(curl, CURLOPT_POSTFIELDS, body.data());
    curl_easy_setopt(curl, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(body.size()));
    curl_easy_setopt(curl, CURLOPT_HTTPHEADER, headers);
    curl_easy_setopt(curl, CURLOPT_CONNECTTIMEOUT_MS, timeout_ms);
    curl_easy_setopt(curl, CURLOPT_TIMEOUT_MS, timeout_ms);
    curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(curl, CURLOPT_ERRORBUFFER, errbuf);
    curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, collect);
    curl_easy_setopt(curl, CURLOPT_WRITEDATA, &response);
    curl_easy_setopt(curl, CURLOPT_USERAGENT, "ncclsmoke-publish");
#if LIBCURL_VERSION_NUM >= 0x075500
    curl_easy_setopt(curl, CURLOPT_PROTOCOLS_STR, "http,https");
#endif
    CURLcode rc = curl_easy_perform(curl);
    long status = 0, os_errno = 0;
    curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &status);
    curl_easy_getinfo(curl, CURLINFO_OS_ERRNO, &os_errno);
    curl_slist_free_all(headers);
    curl_easy_cleanup(curl);

    if (rc != CURLE_OK) {
      r.http_status = 0;
      // curl's text says "Couldn't connect"; the errno tells refused from unreachable.
      r.error = errbuf[0] ? std::string(errbuf) : std::string(curl_easy_strerror(rc));
      if (os_errno != 0) r.error += std::string(" (") + std::strerror(static_cast<int>(os_errno)) + ")";
      continue;
    }
    r.http_status = status;
    if (status >= 200 && status < 300) {
      r.ok = true;
      r.error.clear();
      break;
    }
    r.error = "HTTP " + std::to_string(status);
    std::string why = first_line(response);
    if (!why.empty()) r.error += ": " + why;
    if (!retryable_status(status)) break;
  }
  r.elapsed_s = seconds_since(start);
  return r;
}

}  // namespace ncclsmoke::cronjob
