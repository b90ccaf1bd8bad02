// The CASCADE_* settings: one strict parser, the table, the log prefix.
#include <gtest/gtest.h>

#include <cctype>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "cascade/core/errors.hpp"
#include "cascade/core/log.hpp"
#include "cascade/core/settings.hpp"
#include "cascade/trace/buffer.hpp"
#include "cascade/trace/recorder.hpp"

namespace settings = cascade::settings;
using cascade::UsageError;

namespace {

// The message of the UsageError that f throws ("" when it throws nothing).
template <class F>
std::string error_of(F&& f) {
    try {
        f();
    } catch (const UsageError& e) {
        return e.what();
    }
    return "";
}

}  // namespace

TEST(Settings, FlagAcceptsTheDocumentedWords) {
    for (const char* t : {"1", "on", "ON", "true", "Yes"})
        EXPECT_TRUE(settings::parse_flag("CASCADE_CHECK", t)) << t;
    for (const char* f : {"0", "off", "Off", "false", "no"})
        EXPECT_FALSE(settings::parse_flag("CASCADE_CHECK", f)) << f;
    const std::string e = error_of([] { settings::parse_flag("CASCADE_CHECK", "2"); });
    EXPECT_NE(e.find("CASCADE_CHECK='2'"), std::string::npos) << e;
    EXPECT_NE(e.find("expected 1 or 0"), std::string::npos) << e;
    EXPECT_THROW(settings::parse_flag("CASCADE_CHECK", "enable"), UsageError);
}

TEST(Settings, CountRejectsGarbageOverflowAndRange) {
    EXPECT_EQ(settings::parse_count("N", "16", 16, 100), 16u);
    EXPECT_EQ(settings::parse_count("N", "100", 16, 100), 100u);
    for (const char* bad : {"15", "101", "-1", "+20", " 20", "20 ", "2e3", "0x20", "twenty", "off",
                            "1152921504606846976",      // 2^60: in uint64 but above the limit
                            "99999999999999999999999",  // beyond uint64
                            "1e300"}) {
        const std::string e = error_of([&] { settings::parse_count("N", bad, 16, 100); });
        EXPECT_NE(e.find(std::string("N='") + bad + "'"), std::string::npos) << bad << ": " << e;
        EXPECT_NE(e.find("a whole number from 16 to 100"), std::string::npos) << e;
    }
    EXPECT_NE(error_of([] {
                  settings::parse_count("N", "99999999999999999999999", 0, 5);
              }).find("too large"),
              std::string::npos);
}

TEST(Settings, SecondsAcceptOffAndRejectHugeValues) {
    EXPECT_EQ(settings::parse_seconds("S", "off", 1e6), 0.0);
    EXPECT_EQ(settings::parse_seconds("S", "OFF", 1e6), 0.0);
    EXPECT_EQ(settings::parse_seconds("S", "0", 1e6), 0.0);
    EXPECT_EQ(settings::parse_seconds("S", "2.5", 1e6), 2.5);
    EXPECT_EQ(settings::parse_seconds("S", ".5", 1e6), 0.5);
    for (const char* bad :
         {"1e300", "1e7", "inf", "nan", "-1", "5s", "", "garbage", "1152921504606846976"}) {
        const std::string e = error_of([&] { settings::parse_seconds("S", bad, 1e6); });
        EXPECT_NE(e.find("a number of seconds from 0 to 1e+06, or off"), std::string::npos)
            << bad << ": " << e;
    }
}

TEST(Settings, ChoiceNamesTheChoices) {
    static constexpr std::string_view levels[] = {"error", "warn", "info", "debug"};
    EXPECT_EQ(settings::parse_choice("CASCADE_LOG", "DEBUG", levels), 3u);
    const std::string e = error_of([] { settings::parse_choice("CASCADE_LOG", "loud", levels); });
    EXPECT_NE(e.find("CASCADE_LOG='loud': expected one of error, warn, info, debug"),
              std::string::npos)
        << e;
}

TEST(Settings, EnvironmentReadersUseDefaultsWhenUnsetOrEmpty) {
    ::unsetenv("CASCADE_TEST_X");
    EXPECT_EQ(settings::count("CASCADE_TEST_X", 42, 1, 100), 42u);
    ::setenv("CASCADE_TEST_X", "", 1);
    EXPECT_EQ(settings::count("CASCADE_TEST_X", 42, 1, 100), 42u);
    EXPECT_TRUE(settings::flag("CASCADE_TEST_X", true));
    ::setenv("CASCADE_TEST_X", "7", 1);
    EXPECT_EQ(settings::count("CASCADE_TEST_X", 42, 1, 100), 7u);
    ::setenv("CASCADE_TEST_X", "off", 1);
    EXPECT_EQ(settings::path("CASCADE_TEST_X"), "");
    EXPECT_EQ(settings::seconds("CASCADE_TEST_X", 3, 10), 0.0);
    ::setenv("CASCADE_TEST_X", "out.json", 1);
    EXPECT_EQ(settings::path("CASCADE_TEST_X"), "out.json");
    ::unsetenv("CASCADE_TEST_X");
}

TEST(Settings, ValidateNamesTheBadVariable) {
    ::setenv("CASCADE_TRACE_EVENTS", "1152921504606846976", 1);  // 2^60
    std::string e = error_of([] { settings::validate(); });
    EXPECT_NE(e.find("CASCADE_TRACE_EVENTS='1152921504606846976'"), std::string::npos) << e;
    EXPECT_NE(e.find("from 16 to 268435456"), std::string::npos) << e;
    ::unsetenv("CASCADE_TRACE_EVENTS");
    ::setenv("CASCADE_WATCHDOG", "1e300", 1);
    e = error_of([] { settings::validate(); });
    EXPECT_NE(e.find("CASCADE_WATCHDOG='1e300'"), std::string::npos) << e;
    ::unsetenv("CASCADE_WATCHDOG");
    EXPECT_NO_THROW(settings::validate());
}

TEST(Settings, ValidateChecksTheBroadcastVariables) {
    ::setenv("CASCADE_BCAST_SHAPE", "tree", 1);
    std::string e = error_of([] { settings::validate(); });
    EXPECT_NE(e.find("CASCADE_BCAST_SHAPE='tree': expected one of automatic, binomial, pipelined"),
              std::string::npos)
        << e;
    ::unsetenv("CASCADE_BCAST_SHAPE");
    ::setenv("CASCADE_BCAST_PIECE", "64k", 1);
    e = error_of([] { settings::validate(); });
    EXPECT_NE(e.find("CASCADE_BCAST_PIECE='64k'"), std::string::npos) << e;
    ::unsetenv("CASCADE_BCAST_PIECE");
    ::setenv("CASCADE_BCAST", "maybe", 1);
    e = error_of([] { settings::validate(); });
    EXPECT_NE(e.find("CASCADE_BCAST='maybe'"), std::string::npos) << e;
    ::unsetenv("CASCADE_BCAST");
    EXPECT_NO_THROW(settings::validate());
}

// A trace buffer whose byte count would wrap around used to be allocated too small and then
// written past its end; now it is refused.
TEST(Settings, TraceBufferSizeCannotWrap) {
    EXPECT_THROW(cascade::trace::Buffer(0, "huge", std::size_t(1) << 60), UsageError);
    // 2^61 events of 120 bytes is 0 bytes modulo 2^64.
    EXPECT_THROW(cascade::trace::Buffer(0, "wraps", std::size_t(1) << 61), UsageError);
    cascade::trace::Options huge;
    huge.events_per_thread = std::size_t(1) << 60;
    EXPECT_THROW(cascade::trace::configure(huge), UsageError);
}

TEST(Settings, TableListsEveryVariableOnce) {
    std::set<std::string_view> seen;
    for (const auto& v : settings::variables()) {
        EXPECT_TRUE(v.name.starts_with("CASCADE_")) << v.name;
        EXPECT_TRUE(seen.insert(v.name).second) << v.name;
        EXPECT_FALSE(v.values.empty());
        EXPECT_FALSE(v.dflt.empty());
        EXPECT_FALSE(v.meaning.empty());
    }
    // The core's own, and those the layers above add when they are linked (this test links
    // them all: futures, broadcast, balance, device).
    for (const char* name :
         {"CASCADE_LOG", "CASCADE_CHECK", "CASCADE_WATCHDOG", "CASCADE_TRACE", "CASCADE_DAG",
          "CASCADE_TRACE_EVENTS", "CASCADE_FUTURE_WARN_S", "CASCADE_BCAST", "CASCADE_BCAST_SHAPE",
          "CASCADE_BALANCE", "CASCADE_DEVICE_MEMORY"})
        EXPECT_TRUE(seen.count(name)) << name;
}

#ifdef CASCADE_SOURCE_DIR
// The README's settings table lists every variable of settings::variables().
TEST(Settings, ReadmeTableMatches) {
    std::ifstream in(std::string(CASCADE_SOURCE_DIR) + "/README.md");
    ASSERT_TRUE(in) << "README.md not found";
    std::stringstream ss;
    ss << in.rdbuf();
    const std::string readme = ss.str();
    for (const auto& v : settings::variables()) {
        const std::string row = "| `" + std::string(v.name) + "` | " + std::string(v.values) +
                                " | " + std::string(v.dflt) + " | " + std::string(v.meaning) + " |";
        EXPECT_NE(readme.find(row), std::string::npos) << "README lacks the row:\n" << row;
    }
}

// Every CASCADE_* name the library's sources mention is in the table, and only the settings
// module reads the environment (log.cpp reads the launcher's rank variables, not settings).
TEST(Settings, SourcesReadOnlyTabledVariablesThroughTheParser) {
    namespace fs = std::filesystem;
    std::set<std::string> tabled;
    for (const auto& v : settings::variables())
        tabled.insert(std::string(v.name));
    // Each "CASCADE_<NAME>" in quotes (a scan, not std::regex: GCC's regex header warns under
    // the sanitizers).
    auto quoted = [](const std::string& text) {
        std::vector<std::string> names;
        for (std::size_t at = text.find("\"CASCADE_"); at != std::string::npos;
             at = text.find("\"CASCADE_", at + 1)) {
            std::size_t end = at + 1;
            while (end < text.size() &&
                   (std::isupper(static_cast<unsigned char>(text[end])) ||
                    std::isdigit(static_cast<unsigned char>(text[end])) || text[end] == '_'))
                ++end;
            if (end < text.size() && text[end] == '"')
                names.push_back(text.substr(at + 1, end - at - 1));
        }
        return names;
    };
    int files = 0, names = 0;
    for (const char* dir : {"/src", "/include/cascade"}) {
        for (const auto& f :
             fs::recursive_directory_iterator(std::string(CASCADE_SOURCE_DIR) + dir)) {
            if (!f.is_regular_file()) continue;
            const std::string ext = f.path().extension().string();
            if (ext != ".cpp" && ext != ".hpp") continue;
            ++files;
            std::ifstream in(f.path());
            std::stringstream ss;
            ss << in.rdbuf();
            const std::string text = ss.str();
            const std::string name = f.path().filename().string();
            for (const std::string& v : quoted(text)) {
                if (name == "settings.hpp") continue;  // its comments give examples
                ++names;
                EXPECT_TRUE(tabled.count(v))
                    << f.path() << " reads " << v << ", which the table lacks";
            }
            if (name != "settings.cpp" && name != "log.cpp") {
                EXPECT_EQ(text.find("getenv("), std::string::npos)
                    << f.path() << " reads the environment itself instead of through settings";
            }
        }
    }
    EXPECT_GT(files, 20);
    EXPECT_GT(names, 10);
}
#endif

TEST(Log, EveryLineCarriesTheRankAndLevel) {
    cascade::log::set_rank(3);
    cascade::log::set_level(cascade::log::Level::info);
    testing::internal::CaptureStderr();
    cascade::log::warn("first line\nsecond line");
    cascade::log::debug("not shown at info");
    cascade::log::info("note");
    const std::string out = testing::internal::GetCapturedStderr();
    EXPECT_EQ(out,
              "cascade: rank 3: warning: first line\ncascade: rank 3: warning: second line\n"
              "cascade: rank 3: info: note\n");
    cascade::log::set_level(cascade::log::Level::error);
    testing::internal::CaptureStderr();
    cascade::log::warn("hidden");
    EXPECT_EQ(testing::internal::GetCapturedStderr(), "");
    cascade::log::set_level(cascade::log::Level::warn);
    cascade::log::set_rank(-1);
}

// The suite's own harness: every single-process test runs under the 60 s watchdog (set by
// its main; lost before, when it was the second variable of a gtest_discover_tests property).
TEST(Settings, TestsRunUnderTheWatchdog) {
    EXPECT_NE(std::getenv("CASCADE_WATCHDOG"), nullptr);
}
