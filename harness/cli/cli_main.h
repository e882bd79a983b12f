#pragma once
// The binary's entry point behind main(): parses the command line and runs one subcommand (or the
// mpi transport's child). Returns the process exit code (harness/common/command.h).
namespace ncclsmoke::harness {

int cli_main(int argc, char** argv);

}  // namespace ncclsmoke::harness
