#include "results/report/escape.h"

#include <gtest/gtest.h>

namespace ncclsmoke::report {
namespace {

TEST(ReportEscape, HtmlEscapesMarkupAndQuotes) {
  EXPECT_EQ(html_escape("<script>alert(1)</script>"), "&lt;script&gt;alert(1)&lt;/script&gt;");
  EXPECT_EQ(html_escape("a\" onmouseover='x' & b"), "a&quot; onmouseover=&#39;x&#39; &amp; b");
  EXPECT_EQ(html_escape("plain host-1.example"), "plain host-1.example");
}

TEST(ReportEscape, HtmlReplacesControlCharactersAndInvalidUtf8) {
  EXPECT_EQ(html_escape(std::string("a\0b", 3)),
            "a\xEF\xBF\xBD"
            "b");
  EXPECT_EQ(html_escape("x\x1by"), "x\xEF\xBF\xBDy");
  EXPECT_EQ(html_escape("\xC3\xA9t\xC3\xA9"), "\xC3\xA9t\xC3\xA9");  // valid UTF-8 kept
  EXPECT_EQ(html_escape("bad\xC3"), "bad\xEF\xBF\xBD");              // truncated sequence
  EXPECT_EQ(html_escape("\xC0\xBC"), "\xEF\xBF\xBD\xEF\xBF\xBD");    // overlong '<'
  EXPECT_EQ(html_escape("\xED\xA0\x80"), "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD");  // surrogate
}

TEST(ReportEscape, MarkdownNeutralisesSyntaxAndNewlines) {
  EXPECT_EQ(markdown_escape("[click](http://x) <b>*hi*</b>\nnext | cell"),
            "\\[click\\](http://x) \\<b\\>\\*hi\\*\\</b\\> next \\| cell");
  EXPECT_EQ(markdown_escape("BANDWIDTH_REGRESSION"), "BANDWIDTH\\_REGRESSION");
}

TEST(ReportEscape, UrlEscapeKeepsOnlyUnreservedCharacters) {
  EXPECT_EQ(url_escape("20261201T000000Z-1a2b_c.d~e"), "20261201T000000Z-1a2b_c.d~e");
  EXPECT_EQ(url_escape("a/b c?d#e&f\"g"), "a%2Fb%20c%3Fd%23e%26f%22g");
  EXPECT_EQ(url_escape("/srv/a b/v.json", /*keep_slash=*/true), "/srv/a%20b/v.json");
  EXPECT_EQ(url_escape("javascript:x"), "javascript%3Ax");
  EXPECT_EQ(url_escape("\xC3\xA9"), "%C3%A9");
}

}  // namespace
}  // namespace ncclsmoke::report
