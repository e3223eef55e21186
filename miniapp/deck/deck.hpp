// Deck parsing and validation. A deck is YAML with sections model, train, parallel, comm,
// hardware, output, fault and sweep; `--set a.b=c` overrides any key. Every problem is reported as
// a DeckError naming the key and where it came from (file:line, or --set); `check` lists them all,
// `run` refuses to start while any exists.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "deck/run_config.hpp"

namespace paraxis::driver {

// A deck (and a machine description) is a regular file of at most this many bytes: a directory,
// a FIFO, a device or a larger file is refused before it is read (io/input_file.hpp).
inline constexpr std::size_t kMaxDeckBytes = std::size_t(16) << 20;

struct DeckError {
  std::string key;    // dotted key ("model.heads"), or "" for the file itself
  std::string where;  // "deck.yaml:12", "--set", or the deck path
  std::string message;
  std::string to_string() const;
};

struct SweepPoint {
  RunConfig config;
  std::vector<std::pair<std::string, std::string>> settings;  // the swept keys and values
  std::string skip_reason;  // non-empty: this point cannot run (a sweep goes on without it)
};

struct Deck {
  std::string path;
  std::vector<SweepPoint> points;  // one point when the deck has no sweep
  std::vector<DeckError> errors;   // empty: every point is valid
};

// Parses the deck `text`, applies overrides ("a.b=c"), sizes the sweep (refused above
// sweep.max_points), expands it and validates each point for a run on `world` ranks (0: skip
// the world-size checks, as `check` does without --ranks; negative: an error). `name` is the
// path used in messages (file:line). A deck is one YAML document: a second (after `---`) is an
// error, never silently ignored. Rank 0 reads the file and broadcasts the text, so every
// rank parses the same deck.
Deck load_deck_text(const std::string& text, const std::string& name,
                    const std::vector<std::string>& overrides, int world);

// Reads `path` (a file that is not a regular file of at most kMaxDeckBytes, or cannot be read, is
// a DeckError naming the path and why) and calls load_deck_text.
Deck load_deck(const std::string& path, const std::vector<std::string>& overrides, int world);

// Every key a deck may contain, as "key: type (range)" (the test that keeps docs/deck.md
// complete reads it).
std::vector<std::string> deck_key_reference();

// A configuration as JSON, `config` of summary.json: every key of the deck's key table, nested by
// its dotted name ({"model": {"vocab": 256, ...}, "parallel": {"schedule": "1f1b", ...}, ...}).
nlohmann::json config_to_json(const RunConfig& c);
// The configuration such an object describes, read key by key through the deck's key table (the
// same types and ranges as a deck; a key absent keeps the deck's default), so that
// config_from_json(config_to_json(c)) == c for every key. Throws std::invalid_argument naming the
// key when a value breaks its type or range.
RunConfig config_from_json(const nlohmann::json& j);

}  // namespace paraxis::driver
