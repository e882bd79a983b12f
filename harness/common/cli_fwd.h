#pragma once
// CLI11's names, declared only. CLI/CLI.hpp costs about 7 CPU-seconds in every file that includes
// it (bench/build/build_bench.sh), so headers declare registration functions against these and
// only the files that declare options or parse include <CLI/CLI.hpp>.
namespace CLI {
class App;
class Validator;
}  // namespace CLI
