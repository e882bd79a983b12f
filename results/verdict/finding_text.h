#pragma once
// A finding's message, rendered from its data (verdict.h: Subject, message_template). The one
// place "{reporter}" and "{peer}" become text, so a finding merged from several ranks reads
// "ranks 0, 2-5 (host a)" and renders the same every time; nothing reads the text back.
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "rendezvous/rank_ref.h"
#include "results/verdict/verdict.h"

namespace ncclsmoke::results {

// The subject of a finding a rank makes about itself: reporters {self} (none for a rank < 0),
// its host; `phase`, `transport`, `item` as Subject says.
Subject reported_by(rendezvous::RankRef self, std::string phase = {}, std::string item = {},
                    std::string transport = {});

// "gpu-0, gpu-1, gpu-3", at most `max_shown` names then "and N more"; an empty name is
// "unknown". In the order given.
std::string host_names(const std::vector<std::string>& hosts, std::size_t max_shown);

// "0-3", "1, 4, 7", "0-2, 5" (two in a row: "0, 1").
std::string rank_list(const std::set<int>& ranks);
// The same for any list of ranks, at most `max_runs` runs ("1-999999"; "1, 3, 5, ... and 1,200
// more ranks"), so a message stays one readable line at any world size.
std::string rank_runs(const std::vector<int>& ranks, std::size_t max_runs = 16);

// "rank 3 (host a)", "ranks 0, 2-5 (host a)", "rank 3" (host unknown); "no rank" for none.
std::string reporters_text(const Subject& s);

// The template with "{reporter}" -> reporters_text() and "{peer}" -> the peer as rank_text()
// spells it. Only those two tokens: any other text, braces included, is literal (a backend's
// error may hold JSON). A finding without a template renders as its message.
std::string render_message(const Finding& f);

// f.message = render_message(f).
void render(Finding& f);

// A rule's later word on a finding (a consequence, a wait chain): prefix + text + suffix, in the
// template when there is one (so a later merge renders it too), else in the message.
void wrap_message(Finding& f, std::string_view prefix, std::string_view suffix);
// The whole text anew: a template ("{reporter}" / "{peer}" for the subject's ranks), rendered.
void set_message_template(Finding& f, std::string tmpl);

}  // namespace ncclsmoke::results
