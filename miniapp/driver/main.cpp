// paraxis: command-line entry. MPI first, then Kokkos; every subcommand returns an exit code
// that every rank returns, so a bad deck never leaves a rank waiting.
#include <mpi.h>

#include <CLI/CLI.hpp>
#include <Kokkos_Core.hpp>
#include <chrono>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "driver/commands.hpp"
#include "driver/output_pacer.hpp"
#include "driver/rank_agreement.hpp"

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  // stdout fully buffered when a pipe (mpiexec, srun); the step loop flushes it at most once a
  // second (driver/output_pacer.hpp).
  static char stdout_buffer[1 << 16];
  paraxis::driver::buffer_fully_unless_terminal(stdout, stdout_buffer, sizeof stdout_buffer);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  int code = 0;
  {
    // Kokkos takes its own flags (--kokkos-...) out of argv before CLI11 sees the rest. Kokkos
    // also answers a bare --help (or -h) with its page of options, printed before (and burying)
    // the command's own: it never sees them, so --help is CLI11's alone (--kokkos-help still
    // gives Kokkos' page).
    std::vector<char*> kokkos_argv;
    for (int i = 0; i < argc; ++i)
      if (std::string(argv[i]) != "--help" && std::string(argv[i]) != "-h")
        kokkos_argv.push_back(argv[i]);
    int kokkos_argc = static_cast<int>(kokkos_argv.size());
    kokkos_argv.push_back(nullptr);
    Kokkos::ScopeGuard kokkos(kokkos_argc, kokkos_argv.data());
    // What CLI11 sees: the arguments but Kokkos' own (which Kokkos has read), --help included.
    std::vector<char*> cli_argv;
    for (int i = 0; i < argc; ++i)
      if (std::string(argv[i]).rfind("--kokkos-", 0) != 0) cli_argv.push_back(argv[i]);
    argc = static_cast<int>(cli_argv.size());
    cli_argv.push_back(nullptr);
    argv = cli_argv.data();
    CLI::App app{"paraxis: distributed transformer training benchmark"};
    app.footer("Kokkos' own options (--kokkos-...): paraxis --kokkos-help");
    app.require_subcommand(1);
    paraxis::driver::RunOptions run;
    auto* run_cmd = app.add_subcommand("run", "train a deck's configurations and write results");
    run_cmd->add_option("deck", run.deck, "YAML deck")->required();
    run_cmd->add_option("--set", run.overrides, "override a deck key: key=value (repeatable)");
    run_cmd->add_option("--out", run.out_dir, "output directory (default: a new timestamped one)");
    run_cmd->add_flag("--verify", run.verify, "compare with the single-rank reference");
    run_cmd->add_flag("--force", run.force,
                      "remove earlier results in the output directory first (never mixed)");
    run_cmd->add_option("--resume", run.resume,
                        "continue from a checkpoint: a step-<N> folder, a checkpoint root, or "
                        "latest (the newest complete one under checkpoint.dir)");
    run_cmd->add_flag("--new-lineage", run.new_lineage,
                      "start a new checkpoint lineage, even beside another run's checkpoints in "
                      "checkpoint.dir (it never prunes theirs)");
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
    paraxis::driver::PlanOptions plan;
    auto* plan_cmd = app.add_subcommand(
        "plan", "rank every configuration of a model on a machine description, or evaluate one");
    plan_cmd->add_option("model", plan.model_deck, "deck with the model and train sections")
        ->required();
    plan_cmd->add_option("machine", plan.machine, "machine description (YAML)")->required();
    plan_cmd->add_option("--set", plan.overrides,
                         "override a model/train key of the deck: key=value (parallel.*: "
                         "use --layout)");
    plan_cmd->add_option("--top", plan.top, "configurations to list (default 20)")
        ->check(CLI::PositiveNumber);
    plan_cmd->add_option("--json", plan.json_out, "also write the whole plan to this JSON file");
    plan_cmd->add_option("--layout", plan.layout,
                         "evaluate one layout, every term, e.g. tp=8,pp=8,mb=1,schedule="
                         "interleaved,v=3,sp,recompute=full (fields: tp pp dp ep mb zero schedule "
                         "v sp recompute[=full:N]; the rest from the deck)");
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
      if (code == 0 && *plan_cmd) code = paraxis::driver::plan_command(plan);
    } catch (const CLI::ParseError& e) {
      code = rank == 0 ? app.exit(e) : (e.get_exit_code() ? 2 : 0);
      if (code == 0 && e.get_exit_code() != 0) code = 2;
    } catch (const std::exception& e) {
      // An error only some ranks may have seen: abort the job rather than hang the rest.
      std::fflush(stdout);
      std::fprintf(stderr, "paraxis: error (rank %d): %s\n", rank, e.what());
      std::fflush(stderr);
      std::this_thread::sleep_for(std::chrono::milliseconds(500));  // let mpiexec forward it
      MPI_Abort(MPI_COMM_WORLD, 1);
    }
  }
  MPI_Finalize();
  return code;
}
