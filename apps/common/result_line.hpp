// The machine-readable summary line an app prints on rank 0 at the end of a run:
//   RESULT {"app":"gemm","system":"cascade","n":4096,...,"runs":[0.71,0.70],"residual":null}
// Benchmark runners grep for the "RESULT " prefix and parse the rest as one JSON object.
// Fields keep the order they were added in; non-finite numbers are written as null.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

namespace cascade::apps {

// Median of a non-empty sample (mean of the two middle values for an even count).
inline double median(std::vector<double> v) {
    if (v.empty()) return 0;
    std::sort(v.begin(), v.end());
    const std::size_t m = v.size() / 2;
    return v.size() % 2 ? v[m] : 0.5 * (v[m - 1] + v[m]);
}

class ResultLine {
  public:
    ResultLine& add(const std::string& key, const std::string& value) {
        std::string quoted = "\"";
        for (char c : value) {
            if (c == '"' || c == '\\') quoted.push_back('\\');
            quoted.push_back(c);
        }
        quoted.push_back('"');
        return raw(key, quoted);
    }
    ResultLine& add(const std::string& key, const char* value) {
        return add(key, std::string(value));
    }
    ResultLine& add(const std::string& key, long long value) {
        return raw(key, std::to_string(value));
    }
    ResultLine& add(const std::string& key, int value) {
        return add(key, static_cast<long long>(value));
    }
    ResultLine& add(const std::string& key, double value) { return raw(key, number(value)); }
    ResultLine& add(const std::string& key, const std::vector<double>& values) {
        std::string s = "[";
        for (std::size_t i = 0; i < values.size(); ++i)
            s += (i ? "," : "") + number(values[i]);
        return raw(key, s + "]");
    }
    ResultLine& add_null(const std::string& key) { return raw(key, "null"); }

    std::string str() const { return "RESULT {" + body_ + "}"; }
    void print(std::FILE* out = stdout) const {
        std::fprintf(out, "%s\n", str().c_str());
        std::fflush(out);
    }

  private:
    static std::string number(double x) {
        if (!std::isfinite(x)) return "null";
        char buf[32];
        std::snprintf(buf, sizeof buf, "%.6g", x);
        return buf;
    }
    ResultLine& raw(const std::string& key, const std::string& value) {
        if (!body_.empty()) body_ += ',';
        body_ += '"' + key + "\":" + value;
        return *this;
    }

    std::string body_;
};

}  // namespace cascade::apps
