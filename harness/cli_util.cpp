#include "harness/cli_util.h"

#include <iostream>

#include "harness/commands.h"

namespace ncclsmoke::harness {

std::optional<int> parse_command_line(CLI::App& app, int argc, char** argv) {
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::cerr << "ncclsmoke: error: " << e.what() << " (see 'ncclsmoke --help')\n";
    return kExitUsage;
  }
  return std::nullopt;
}

}  // namespace ncclsmoke::harness
