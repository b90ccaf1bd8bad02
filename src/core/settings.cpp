#include "cascade/core/settings.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <iterator>
#include <string>
#include <system_error>
#include <vector>

#include "cascade/core/errors.hpp"

namespace cascade::settings {

namespace {

// The core's own variables; the layers above add theirs (add()). Keep in step with the README's
// settings table (a test compares them).
constexpr Variable kVariables[] = {
    {"CASCADE_LOG", "error, warn, info or debug", "warn",
     "what Cascade writes to stderr; every line starts with `cascade: rank R:`"},
    {"CASCADE_CHECK", "1 or 0 (also on/off, true/false, yes/no)",
     "0 (1 when built with -DCASCADE_CHECKED=ON)",
     "checked mode: every promise is counted; too many throw UsageError, too few make join() "
     "throw IncompleteGraphError naming the tasks"},
    {"CASCADE_WATCHDOG", "seconds (up to 1e6), 0 or off", "600",
     "when join() sees no progress for that long, every rank prints what it waits for and "
     "the job ends"},
    {"CASCADE_TRACE", "a file path (%r in it: one file per rank, named by rank), or off",
     "no trace",
     "records every rank's tasks and messages into one Chrome trace-event JSON file (Perfetto)"},
    {"CASCADE_DAG", "a file path (%r: one file per rank), or off", "no graph",
     "writes the promise edges actually taken as Graphviz DOT"},
    {"CASCADE_TRACE_EVENTS", "a whole number from 16 to 268435456", "131072",
     "events kept per thread while tracing (120 bytes each, allocated when the thread starts); "
     "later events are dropped and counted"},
    {"CASCADE_WORKERS", "a whole number from 1 to 4096", "the rank's share of its node's CPUs",
     "worker threads per rank for programs that use cascade::default_workers (every app)"},
    {"CASCADE_PIN_WORKERS", "1 or 0 (also on/off, true/false, yes/no)", "0",
     "pins worker i of each pool to the i-th CPU the rank may run on (an unbound rank: after "
     "the workers of its node's lower ranks)"},
    {"CASCADE_MEMBARRIER", "1 or 0 (also on/off, true/false, yes/no)", "1",
     "0: wake sleeping workers with fenced stores instead of membarrier()"},
    {"CASCADE_TRIM", "seconds (up to 1e6), 0 or off", "adaptive",
     "after a join(), the free memory the C library's allocator keeps goes back to the system "
     "(glibc's malloc_trim), at most once per this many seconds; unset: once 100 times the last "
     "trim's duration has passed (about 1 % of the time); 0: never"},
    {"CASCADE_DEMO_RANKS", "a whole number from 1", "the number of cores",
     "`./cascade demo` only: how many MPI ranks run the demo"},
};

[[noreturn]] void bad(std::string_view name, std::string_view text, std::string_view expected) {
    std::string msg;
    msg.reserve(name.size() + text.size() + expected.size() + 16);
    msg.append(name).append("='").append(text).append("': expected ").append(expected);
    throw UsageError(msg);
}

bool iequal(std::string_view a, std::string_view b) {
    return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
               auto lower = [](char c) { return c >= 'A' && c <= 'Z' ? char(c - 'A' + 'a') : c; };
               return lower(x) == lower(y);
           });
}

// The table: the core's variables, then each layer's (add()); and the layers' checks.
struct Table {
    std::vector<Variable> all{std::begin(kVariables), std::end(kVariables)};
    std::vector<void (*)()> checks;
};
Table& table() {
    static Table t;
    return t;
}

}  // namespace

std::span<const Variable> variables() noexcept {
    return table().all;
}

void add(std::span<const Variable> vars, void (*check)()) {
    Table& t = table();
    t.all.insert(t.all.end(), vars.begin(), vars.end());
    if (check) t.checks.push_back(check);
}

std::string table_text() {
    std::string out;
    for (const Variable& v : variables()) {
        out += "  " + std::string(v.name) + "\n";
        out += "      values:  " + std::string(v.values) + "\n";
        out += "      default: " + std::string(v.dflt) + "\n";
        out += "      " + std::string(v.meaning) + "\n";
    }
    return out;
}

std::optional<std::string> raw(std::string_view name) {
    const char* v = std::getenv(std::string(name).c_str());
    if (!v || !*v) return std::nullopt;
    return std::string(v);
}

bool parse_flag(std::string_view name, std::string_view text) {
    for (std::string_view t : {"1", "on", "true", "yes"})
        if (iequal(text, t)) return true;
    for (std::string_view f : {"0", "off", "false", "no"})
        if (iequal(text, f)) return false;
    bad(name, text, "1 or 0 (on/off, true/false, yes/no)");
}

std::uint64_t parse_count(std::string_view name, std::string_view text, std::uint64_t lo,
                          std::uint64_t hi) {
    const std::string range =
        "a whole number from " + std::to_string(lo) + " to " + std::to_string(hi);
    std::uint64_t n = 0;
    const char* first = text.data();
    const char* last = first + text.size();
    if (text.empty() || !(text.front() >= '0' && text.front() <= '9')) bad(name, text, range);
    auto [ptr, ec] = std::from_chars(first, last, n);
    if (ec == std::errc::result_out_of_range) bad(name, text, range + " (this one is too large)");
    if (ec != std::errc() || ptr != last) bad(name, text, range);
    if (n < lo || n > hi) bad(name, text, range);
    return n;
}

double parse_seconds(std::string_view name, std::string_view text, double hi) {
    char buf[32];
    std::to_chars_result r = std::to_chars(buf, buf + sizeof buf, hi);
    const std::string expected =
        "a number of seconds from 0 to " + std::string(buf, r.ptr) + ", or off (0)";
    if (iequal(text, "off")) return 0.0;
    if (text.empty() || !((text.front() >= '0' && text.front() <= '9') || text.front() == '.'))
        bad(name, text, expected);
    double s = 0;
    const char* last = text.data() + text.size();
    auto [ptr, ec] = std::from_chars(text.data(), last, s);
    if (ec != std::errc() || ptr != last || !std::isfinite(s) || s < 0 || s > hi)
        bad(name, text, expected);
    return s;
}

std::size_t parse_choice(std::string_view name, std::string_view text,
                         std::span<const std::string_view> choices) {
    for (std::size_t i = 0; i < choices.size(); ++i)
        if (iequal(text, choices[i])) return i;
    std::string expected = "one of ";
    for (std::size_t i = 0; i < choices.size(); ++i)
        expected += (i ? ", " : "") + std::string(choices[i]);
    bad(name, text, expected);
}

void validate() {
    static constexpr std::string_view kLevels[] = {"error", "warn", "info", "debug"};
    choice("CASCADE_LOG", 0, kLevels);
    flag("CASCADE_CHECK", false);
    seconds("CASCADE_WATCHDOG", 0, kMaxSeconds);
    count("CASCADE_TRACE_EVENTS", kTraceEventsMin, kTraceEventsMin, kTraceEventsMax);
    count("CASCADE_WORKERS", 1, 1, 4096);
    flag("CASCADE_PIN_WORKERS", false);
    flag("CASCADE_MEMBARRIER", true);
    seconds("CASCADE_TRIM", 0, kMaxSeconds);
    for (void (*check)() : table().checks)
        check();
}

bool flag(std::string_view name, bool dflt) {
    auto v = raw(name);
    return v ? parse_flag(name, *v) : dflt;
}

std::uint64_t count(std::string_view name, std::uint64_t dflt, std::uint64_t lo, std::uint64_t hi) {
    auto v = raw(name);
    return v ? parse_count(name, *v, lo, hi) : dflt;
}

double seconds(std::string_view name, double dflt, double hi) {
    auto v = raw(name);
    return v ? parse_seconds(name, *v, hi) : dflt;
}

std::size_t choice(std::string_view name, std::size_t dflt,
                   std::span<const std::string_view> choices) {
    auto v = raw(name);
    return v ? parse_choice(name, *v, choices) : dflt;
}

std::string path(std::string_view name) {
    auto v = raw(name);
    if (!v || iequal(*v, "off") || *v == "0") return std::string();
    return *v;
}

}  // namespace cascade::settings
