// Writes the sample verdicts (sample_verdicts.h) as JSON files into a directory, for the script
// tests that run `ncclsmoke publish` on them (check_metrics.sh). Usage: cronjob_write_samples DIR
#include <iostream>

#include "results/verdict/write.h"
#include "tests/cronjob/sample_verdicts.h"

int main(int argc, char** argv) {
  using namespace ncclsmoke;
  if (argc != 2) {
    std::cerr << "usage: cronjob_write_samples DIR\n";
    return 2;
  }
  const std::string dir = argv[1];
  auto odd = cronjob::testing::failing("we\\ird \"profile\"/with\nnewline");
  odd.tool.version = "0.1.0+\"dirty\"";
  auto inconclusive = cronjob::testing::passing();
  inconclusive.verdict = results::Outcome::inconclusive;
  inconclusive.exit_code = 4;
  inconclusive.transports.clear();
  inconclusive.identities.clear();
  inconclusive.phases.back().status = results::PhaseStatus::skipped;
  inconclusive.findings = {results::make_finding(results::Code::BASELINE_MISSING, "no profile selected")};
  try {
    results::write_json_atomically(dir + "/pass.json", results::to_json(cronjob::testing::passing()));
    results::write_json_atomically(dir + "/fail.json", results::to_json(cronjob::testing::failing()));
    results::write_json_atomically(dir + "/odd-labels.json", results::to_json(odd));
    results::write_json_atomically(dir + "/inconclusive.json", results::to_json(inconclusive));
  } catch (const std::exception& e) {
    std::cerr << "cronjob_write_samples: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
