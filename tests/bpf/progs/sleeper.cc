// sleeper - a controlled target with exact ground truth for the BPF tier.
//
// USAGE: sleeper US N
// Reads one line from stdin (so the test can attach first), then calls
// work::Sleeper::nap(US) N times; each call sleeps US microseconds
// (clock_nanosleep, absolute deadline, so a call never returns early).
// Prints "done" and exits.
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <iostream>
#include <string>

namespace work {
class Sleeper {
public:
    __attribute__((noinline)) void nap(unsigned us);
    unsigned long naps = 0;
};

void Sleeper::nap(unsigned us)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    t.tv_nsec += (long)us * 1000;
    t.tv_sec += t.tv_nsec / 1000000000L;
    t.tv_nsec %= 1000000000L;
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &t, nullptr))
        ;
    naps++;
    asm volatile("" ::: "memory");
}
}  // namespace work

int main(int argc, char **argv)
{
    if (argc != 3) {
        std::fprintf(stderr, "usage: sleeper US N\n");
        return 2;
    }
    unsigned us = std::strtoul(argv[1], nullptr, 10);
    long n = std::strtol(argv[2], nullptr, 10);
    std::string line;
    std::getline(std::cin, line);
    work::Sleeper s;
    for (long i = 0; i < n; i++)
        s.nap(us);
    std::printf("done %lu\n", s.naps);
    return 0;
}
