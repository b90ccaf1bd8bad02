// One JSON object on one line: the record every benchmark program and app prints for its
// runner. Apps prefix it with "RESULT " (print_result); the suites under bench/ print it bare.
//   RESULT {"app":"gemm","system":"cascade","n":4096,...,"runs":[0.71,0.70],"residual":null}
// Fields keep the order they were added in, strings are escaped, and a number that is not
// finite is written as null (JSON has no nan or inf). The runners (bench/benchlib.py) add the
// provenance fields (commit, host, CPU, MPI, date) when they write the records to a file.
#pragma once

#include <cmath>
#include <concepts>
#include <cstdio>
#include <string>
#include <string_view>
#include <vector>

namespace cascade_bench {

class Record {
  public:
    Record& add(std::string_view key, std::string_view value) { return raw(key, quote(value)); }
    Record& add(std::string_view key, const char* value) {
        return add(key, std::string_view(value));
    }
    Record& add(std::string_view key, const std::string& value) {
        return add(key, std::string_view(value));
    }
    // Integers (bool as true/false).
    template <std::integral T>
    Record& add(std::string_view key, T value) {
        if constexpr (std::is_same_v<T, bool>)
            return raw(key, value ? "true" : "false");
        else
            return raw(key, std::to_string(value));
    }
    // Floating point: %.6g, or the given printf format (e.g. "%.3e"); null when not finite.
    Record& add(std::string_view key, double value, const char* format = "%.6g") {
        return raw(key, number(value, format));
    }
    Record& add(std::string_view key, const std::vector<double>& values) {
        std::string s = "[";
        for (std::size_t i = 0; i < values.size(); ++i) {
            if (i) s += ',';
            s += number(values[i], "%.6g");
        }
        return raw(key, s + "]");
    }
    Record& add_null(std::string_view key) { return raw(key, "null"); }

    std::string str() const { return "{" + body_ + "}"; }

    // One line on `out` (flushed): the bare object, or "RESULT " and the object.
    void print(std::FILE* out = stdout) const { emit(out, ""); }
    void print_result(std::FILE* out = stdout) const { emit(out, "RESULT "); }

    // JSON string literal of `s`, quotes included.
    static std::string quote(std::string_view s) {
        std::string q = "\"";
        for (const char c : s) {
            const auto u = static_cast<unsigned char>(c);
            if (c == '"' || c == '\\') {
                q += '\\';
                q += c;
            } else if (c == '\n') {
                q += "\\n";
            } else if (c == '\t') {
                q += "\\t";
            } else if (u < 0x20) {
                char buf[8];
                std::snprintf(buf, sizeof buf, "\\u%04x", u);
                q += buf;
            } else {
                q += c;
            }
        }
        return q + '"';
    }

  private:
    static std::string number(double x, const char* format) {
        if (!std::isfinite(x)) return "null";
        char buf[64];
        std::snprintf(buf, sizeof buf, format, x);
        return buf;
    }
    Record& raw(std::string_view key, std::string_view value) {
        if (!body_.empty()) body_ += ',';
        body_ += quote(key);
        body_ += ':';
        body_ += value;
        return *this;
    }
    void emit(std::FILE* out, const char* prefix) const {
        std::fprintf(out, "%s%s\n", prefix, str().c_str());
        std::fflush(out);
    }

    std::string body_;
};

}  // namespace cascade_bench
