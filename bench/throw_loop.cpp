// throw_loop.cpp: C++ throw/catch in a loop, timed inside the process (start-up excluded),
// printing "ns_per_throw=N". bench/bench.py runs it with and without the library preloaded:
// an unwinder of ours that exported _Unwind_* would take over the host's exception handling
// (a shared libunwind makes Python's C++ extensions' exceptions many times slower).
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>

__attribute__((noinline)) static void thrower(int i)
{
    if (i >= 0)
        throw std::runtime_error("bench");
}

__attribute__((noinline)) static int depth(int n, int i)
{
    if (n == 0) {
        thrower(i);
        return 0;
    }
    return depth(n - 1, i) + 1; // a few frames to unwind, as in a real call stack
}

int main(int argc, char **argv)
{
    int n = argc > 1 ? atoi(argv[1]) : 100000;
    long caught = 0;
    auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < n; i++) {
        try {
            depth(8, i);
        } catch (const std::exception &) {
            caught++;
        }
    }
    auto t1 = std::chrono::steady_clock::now();
    double ns = std::chrono::duration<double, std::nano>(t1 - t0).count() / (n > 0 ? n : 1);
    printf("caught=%ld ns_per_throw=%.1f\n", caught, ns);
    return caught == n ? 0 : 1;
}
