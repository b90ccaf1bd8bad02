// Settings from CASCADE_* environment variables: the table of every variable and one strict
// parser. A value that is not what the variable takes (garbage, out of range, a number too
// large to represent) is an error that names the variable, the value and what it accepts;
// nothing is silently clamped, wrapped or truncated.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

namespace cascade::settings {

/// One CASCADE_* environment variable, as listed by `./cascade help` and the README.
struct Variable {
    std::string_view name;     ///< e.g. "CASCADE_TRACE"
    std::string_view values;   ///< what it accepts, e.g. "a number of seconds, or off"
    std::string_view dflt;     ///< what happens when it is unset
    std::string_view meaning;  ///< what it does
};

/// Every CASCADE_* variable the library reads: the core's, then those of the layers linked
/// into the program (see add()), in the order they were added. Valid until the next add().
std::span<const Variable> variables() noexcept;

/// Adds a layer's variables to the table, and `check` (may be null) to what validate() runs:
/// how a layer above the core owns its settings without the core naming them. Called once per
/// layer while the program starts (src/<layer>/layer.cpp), before any thread of Cascade runs.
void add(std::span<const Variable> vars, void (*check)());

/// The table as text (one variable per paragraph), for `cascade help` and the README.
std::string table_text();

/// The raw value of an environment variable; nullopt when unset. An empty value counts as
/// unset, so `CASCADE_X= program` means the default.
std::optional<std::string> raw(std::string_view name);

// ---- strict parsers: pure functions of (name, text); they throw UsageError on bad input ----

/// A switch: 1/0, on/off, true/false, yes/no (any case).
bool parse_flag(std::string_view name, std::string_view text);

/// A whole decimal number in [lo, hi] (digits only: no sign, no exponent, no suffix).
std::uint64_t parse_count(std::string_view name, std::string_view text, std::uint64_t lo,
                          std::uint64_t hi);

/// A number of seconds in [0, hi] (decimal, fractions allowed); "off" means 0.
double parse_seconds(std::string_view name, std::string_view text, double hi);

/// One of `choices` (any case); returns its index.
std::size_t parse_choice(std::string_view name, std::string_view text,
                         std::span<const std::string_view> choices);

// ---- the same, reading the variable; unset or empty gives dflt -----------------------------

/// parse_flag on the variable's value, or dflt when unset.
bool flag(std::string_view name, bool dflt);
/// parse_count on the variable's value, or dflt when unset.
std::uint64_t count(std::string_view name, std::uint64_t dflt, std::uint64_t lo, std::uint64_t hi);
/// parse_seconds on the variable's value, or dflt when unset.
double seconds(std::string_view name, double dflt, double hi);
/// parse_choice on the variable's value, or dflt when unset.
std::size_t choice(std::string_view name, std::size_t dflt,
                   std::span<const std::string_view> choices);
/// The variable's value as a path ("" when unset).
std::string path(std::string_view name);

/// The largest number of seconds a duration setting accepts (about 11.6 days): larger
/// values are rejected rather than overflowing a clock.
inline constexpr double kMaxSeconds = 1e6;

/// Bounds of CASCADE_TRACE_EVENTS: at most 2^28 events (32 GiB) per thread.
inline constexpr std::uint64_t kTraceEventsMin = 16;
/// See kTraceEventsMin.
inline constexpr std::uint64_t kTraceEventsMax = std::uint64_t(1) << 28;

/// Parses every CASCADE_* variable that is set (the core's and those of the layers that were
/// added) and throws UsageError for the first one whose value is wrong, so a typo stops the
/// program at start rather than at first use. Pools call it when they start.
void validate();

}  // namespace cascade::settings
