// lg_values.cuh: the value arguments that nll.cu (labels) and gather.cu (ids) share:
//   good:N           N values, k % MOD for k = 0..N-1 (MOD: the class or row count)
//   bad:N:POS:VALUE  the same, but VALUE at index POS
//   an integer       that value
// lg_parse_values(arg, mod, out) appends what arg means and returns nullptr; returns why it is
// malformed, or "" when arg is no value argument at all (the caller's own "unknown argument").
#pragma once
#include <cctype>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

static inline const char *lg_parse_values(const std::string &a, int64_t mod, std::vector<int64_t> &out)
{
    auto good = [mod](int64_t k) { return mod > 0 ? k % mod : k; };
    if (a.rfind("good:", 0) == 0) {
        int64_t n = strtoll(a.c_str() + 5, nullptr, 10);
        for (int64_t k = 0; k < n; k++) out.push_back(good(k));
        return nullptr;
    }
    if (a.rfind("bad:", 0) == 0) {
        long long n, pos, v;
        if (sscanf(a.c_str(), "bad:%lld:%lld:%lld", &n, &pos, &v) != 3 || pos < 0 || pos >= n)
            return "bad pattern bad:N:POS:VALUE";
        for (int64_t k = 0; k < n; k++) out.push_back(k == pos ? v : good(k));
        return nullptr;
    }
    if (a.size() && (isdigit((unsigned char)a[0]) || a[0] == '-')) {
        char *end;
        out.push_back(strtoll(a.c_str(), &end, 10));
        return *end ? "bad value (not an integer)" : nullptr;
    }
    return "";
}
