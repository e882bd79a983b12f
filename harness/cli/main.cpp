// ncclsmoke: a multi-rank smoke test for the communication path of GPU training clusters.
#include "harness/cli/cli_main.h"

int main(int argc, char** argv) { return ncclsmoke::harness::cli_main(argc, argv); }
