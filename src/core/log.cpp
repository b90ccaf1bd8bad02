#include "cascade/core/log.hpp"

#include <unistd.h>
#include <array>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>

#include "cascade/core/settings.hpp"

namespace cascade::log {

namespace {

constexpr std::array<std::string_view, 4> kNames{"error", "warn", "info", "debug"};
constexpr std::array<std::string_view, 4> kLabels{"error", "warning", "info", "debug"};

std::atomic<int> g_level{-1};  // -1: not read yet
std::atomic<int> g_rank{-2};   // -2: not known yet; -1: unknown

int rank_from_launcher() noexcept {
    for (const char* var : {"OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK", "SLURM_PROCID"}) {
        const char* v = std::getenv(var);
        if (!v || !*v) continue;
        int r = 0;
        for (const char* p = v; *p; ++p) {
            if (*p < '0' || *p > '9' || r > 100000000) return -1;
            r = r * 10 + (*p - '0');
        }
        return r;
    }
    return -1;
}

void write_raw(const std::string& s) noexcept {
    std::size_t off = 0;
    while (off < s.size()) {
        const ssize_t n = ::write(2, s.data() + off, s.size() - off);
        if (n <= 0) return;
        off += static_cast<std::size_t>(n);
    }
}

}  // namespace

Level level() noexcept {
    int l = g_level.load(std::memory_order_relaxed);
    if (l >= 0) return static_cast<Level>(l);
    int parsed = static_cast<int>(Level::warn);
    std::string complaint;
    try {
        parsed = static_cast<int>(settings::choice("CASCADE_LOG", parsed, kNames));
    } catch (const std::exception& e) {
        complaint = e.what();
    }
    int expected = -1;
    if (g_level.compare_exchange_strong(expected, parsed) && !complaint.empty())
        write(Level::error, complaint + " (using warn)");
    return static_cast<Level>(g_level.load(std::memory_order_relaxed));
}

void set_level(Level l) noexcept {
    g_level.store(static_cast<int>(l), std::memory_order_relaxed);
}

void set_rank(int r) noexcept {
    g_rank.store(r < 0 ? -1 : r, std::memory_order_relaxed);
}

int rank() noexcept {
    int r = g_rank.load(std::memory_order_relaxed);
    if (r == -2) {
        r = rank_from_launcher();
        int expected = -2;
        if (!g_rank.compare_exchange_strong(expected, r)) r = expected;
    }
    return r;
}

void write(Level l, std::string_view msg) noexcept {
    if (!enabled(l)) return;
    try {
        std::string prefix = "cascade: ";
        if (const int r = rank(); r >= 0) prefix += "rank " + std::to_string(r) + ": ";
        prefix += kLabels[static_cast<std::size_t>(l)];
        prefix += ": ";
        std::string out;
        out.reserve(msg.size() + prefix.size() + 1);
        std::size_t start = 0;
        while (start <= msg.size()) {
            std::size_t end = msg.find('\n', start);
            if (end == std::string_view::npos) end = msg.size();
            if (end > start || start < msg.size()) {
                out += prefix;
                out.append(msg.substr(start, end - start));
                out += '\n';
            }
            if (end >= msg.size()) break;
            start = end + 1;
        }
        write_raw(out);
    } catch (...) {
        // Out of memory while formatting: say what we can without allocating.
        if (::write(2, msg.data(), msg.size()) > 0 && ::write(2, "\n", 1) > 0) {
        }
    }
}

}  // namespace cascade::log
