// paraxis: command-line entry. MPI first, then Kokkos; every subcommand returns an exit code
// that every rank returns, so a bad deck never leaves a rank waiting.
#include <mpi.h>

#include <CLI/CLI.hpp>
#include <Kokkos_Core.hpp>
#include <chrono>
#include <cstdio>
#include <string>
#include <thread>

#include "driver/commands.hpp"
#include "driver/rank_agreement.hpp"

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  int code = 0;
  {
    // Kokkos takes its own flags (--kokkos-...) out of argv before CLI11 sees the rest.
    Kokkos::ScopeGuard kokkos(argc, argv);
    CLI::App app{"paraxis: distributed transformer training benchmark"};
    app.require_subcommand(1);
    paraxis::driver::RunOptions run;
    auto* run_cmd = app.add_subcommand("run", "train a deck's configurations and write results");
    run_cmd->add_option("deck", run.deck, "YAML deck")->required();
    run_cmd->add_option("--set", run.overrides, "override a deck key: key=value (repeatable)");
    run_cmd->add_option("--out", run.out_dir, "output directory (default: a new timestamped one)");
    run_cmd->add_flag("--verify", run.verify, "compare with the single-rank reference");
    run_cmd->add_flag("--force", run.force,
                      "remove earlier results in the output directory first (never mixed)");
    std::string check_deck;
    std::vector<std::string> check_overrides;
    auto* check_cmd = app.add_subcommand("check", "validate a deck and report every error");
    check_cmd->add_option("deck", check_deck, "YAML deck")->required();
    check_cmd->add_option("--set", check_overrides, "override a deck key: key=value");
    int check_ranks = 0;
    check_cmd
        ->add_option("--ranks", check_ranks,
                     "validate the grid (and expand `auto`) for this many ranks")
        ->check(CLI::PositiveNumber);
    std::vector<std::string> report_dirs;
    auto* report_cmd =
        app.add_subcommand("report", "measured against predicted, tables and plots, per point");
    report_cmd->add_option("dirs", report_dirs, "result folders (paraxis run --out)")
        ->required()
        ->check(CLI::ExistingDirectory);
    std::string plan_model, plan_machine, plan_json;
    std::vector<std::string> plan_overrides;
    int plan_top = 20;
    auto* plan_cmd =
        app.add_subcommand("plan", "rank every configuration of a model on a machine description");
    plan_cmd->add_option("model", plan_model, "deck with the model and train sections")->required();
    plan_cmd->add_option("machine", plan_machine, "machine description (YAML)")->required();
    plan_cmd->add_option("--set", plan_overrides, "override a key of the deck: key=value");
    plan_cmd->add_option("--top", plan_top, "configurations to list (default 20)")
        ->check(CLI::PositiveNumber);
    plan_cmd->add_option("--json", plan_json, "also write the whole plan to this JSON file");
    for (int i = 0; i < argc; ++i) run.command_line += (i ? " " : "") + std::string(argv[i]);
    // Every rank must run the same command (an MPMD launch with different arguments would
    // otherwise hang in mismatched collectives): checked before anything else.
    const std::string disagreement = paraxis::driver::command_line_disagreement(argc, argv);
    if (!disagreement.empty()) {
      if (rank == 0) std::fprintf(stderr, "paraxis: error: %s\n", disagreement.c_str());
      code = 2;
    }
    try {
      if (code == 0) app.parse(argc, argv);
      if (code == 0 && *run_cmd) code = paraxis::driver::run_command(run);
      if (code == 0 && *check_cmd)
        code = paraxis::driver::check_command(check_deck, check_overrides, check_ranks);
      if (code == 0 && *report_cmd) code = paraxis::driver::report_command(report_dirs);
      if (code == 0 && *plan_cmd)
        code = paraxis::driver::plan_command(plan_model, plan_machine, plan_overrides, plan_top,
                                             plan_json);
    } catch (const CLI::ParseError& e) {
      code = rank == 0 ? app.exit(e) : (e.get_exit_code() ? 2 : 0);
      if (code == 0 && e.get_exit_code() != 0) code = 2;
    } catch (const std::exception& e) {
      // An error only some ranks may have seen: abort the job rather than hang the rest.
      std::fprintf(stderr, "paraxis: error (rank %d): %s\n", rank, e.what());
      std::fflush(stderr);
      std::this_thread::sleep_for(std::chrono::milliseconds(500));  // let mpiexec forward it
      MPI_Abort(MPI_COMM_WORLD, 1);
    }
  }
  MPI_Finalize();
  return code;
}
