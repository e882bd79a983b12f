#pragma once
// Escaping of every string that comes from the history (hosts, messages, run ids, profile names
// all come from verdict files anyone can write) before it enters the report.
#include <string>
#include <string_view>

namespace ncclsmoke::report {

// For HTML text and quoted attribute values (also inside inline SVG): & < > " ' become entities,
// control characters other than tab/newline become U+FFFD, and invalid UTF-8 bytes become U+FFFD,
// so no input can open a tag, close an attribute or confuse the parser.
std::string html_escape(std::string_view s);

// For one line of Markdown: newlines become spaces, and the characters Markdown (and the chat
// tools that render it) treat as syntax - \ ` * _ [ ] < > | # ! ~ - are backslash-escaped, so a
// message cannot inject links, HTML or table cells.
std::string markdown_escape(std::string_view s);

// Percent-encoding (RFC 3986) for a piece of a URL: every byte but the unreserved characters
// (A-Z a-z 0-9 - . _ ~) becomes %XX; keep_slash leaves '/' as it is (a file path). A run id put
// into --verdict-url's template, or a verdict path into a file:// link, so neither can end the
// URL, add a query or change its scheme. The result still goes through html_escape in a page.
std::string url_escape(std::string_view s, bool keep_slash = false);

}  // namespace ncclsmoke::report
