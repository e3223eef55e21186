// The parts of `paraxis report` (report.cpp strings them together): load every results folder
// and analyse each ok point against the models (report_load.cpp, report_point.cpp), compare the
// points with each other (report_compare.cpp: ranks, accuracy, scaling, machines side by side),
// and write report.json, the plots and report.md (report_write.cpp). Rank 0 only.
#pragma once

#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "analysis/diagnosis.hpp"
#include "deck/run_config.hpp"

namespace paraxis::driver::report {

constexpr double kEveryPointPct = 15.0, kMeanPct = 10.0;  // issue 9's accuracy target
// A point's ranks are uneven when their compute spread exceeds the calibrated one by more than
// this fraction of the step (the diagnosis's noise floor, docs/diagnosis.md).
constexpr double kUnevenStepFraction = 0.05;

// One ok point, measured against predicted.
struct Analysed {
  nlohmann::json point;  // the report's entry
  std::string model;  // every model.* key and the precision: what scaling compares like with like
  std::string model_label;  // the same, short, for tables
  double measured_step = 0, predicted_step = 0;
  bool predicted = false;
  // The ranks' measured compute spread beyond the calibrated one (report.json rank_spread).
  double uneven_excess_s = 0;
  bool uneven() const { return uneven_excess_s > kUnevenStepFraction * measured_step; }
};

// Point `p` of summary.json (validated, status ok) of folder `dir` measured on `machine`: its
// terms, measured against the analytic models with the point's own calibration. Throws on a
// point the models cannot take.
// host: ranks and cores per host, which scale the diagnosis's thresholds (diagnosis.hpp).
Analysed analyse(const nlohmann::json& p, const std::string& dir, const std::string& machine,
                 const diagnosis::Host& host = {});
// A point's short label ("tp2 pp2 dp1 z0 1f1b m8"), as the report's tables show it.
std::string point_label(const RunConfig& c);

// What the folders hold: machines, every ok point analysed, the calibrated collectives (one row
// per axis, operation and rank count per folder), the points not analysed, warnings.
struct Loaded {
  nlohmann::json machines = nlohmann::json::array(), calibration = nlohmann::json::array();
  nlohmann::json not_analysed = nlohmann::json::array();
  // Findings from failure records (dead ranks, hangs: diagnosis::failure_finding).
  nlohmann::json failures = nlohmann::json::array();
  std::vector<std::string> warnings;
  std::vector<Analysed> all;
};

// A warning about a folder's provenance object, or nullopt. The report passes the BLAS rule
// (driver/provenance.hpp, blas_warning_of), which lives with the kernels' BLAS detection: the
// analysis takes it as a function, so that it depends on no Kokkos library.
using ProvenanceWarning = std::function<std::optional<std::string>(const nlohmann::json&)>;

// Reads and validates every folder's summary.json (read_summary) and analyses its ok points.
// Returns 0, or 2 after printing the error (a folder given twice, no summary.json, an invalid
// summary, a point that cannot be analysed). provenance_warning (may be empty) adds a warning per
// folder.
int load_folders(const std::vector<std::string>& dirs, Loaded& in,
                 const ProvenanceWarning& provenance_warning = {});

// The points compared with each other. Sets each point's rank_measured and rank_predicted.
struct Comparison {
  nlohmann::json points = nlohmann::json::array();  // every analysed point, in folder order
  int n_pred = 0;                                   // points with a prediction
  double max_abs = 0;                               // largest |residual| %, step time
  nlohmann::json accuracy, misses = nlohmann::json::array();
  nlohmann::json strong = nlohmann::json::array(), weak = nlohmann::json::array();
  nlohmann::json side = nlohmann::json::array();  // machines side by side
};
Comparison compare_points(std::vector<Analysed>& all);

// report.json's content: the folders' machines, points, calibration, accuracy, scaling, warnings,
// every finding most costly first, the sensitivity (docs/report.md). Pure.
nlohmann::json report_json(const std::vector<std::string>& dirs, const Loaded& in,
                           const Comparison& cmp);
// report.md's text from report.json's content; plots_note: why there are no plots (empty: they
// are looked for under dirs.front()/plots/).
std::string report_markdown(const std::vector<std::string>& dirs, const nlohmann::json& report,
                            const Comparison& cmp, const std::string& plots_note);

// Writes report.json, plots/ and report.md into dirs.front() and prints the summary line.
// Returns 0, or 4 when a file could not be written or the plot script failed.
int write_report(const std::vector<std::string>& dirs, const Loaded& in, const Comparison& cmp);

}  // namespace paraxis::driver::report
