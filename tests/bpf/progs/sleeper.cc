// sleeper - a controlled target with exact ground truth for the BPF tier.
//
// USAGE: sleeper US N
//        sleeper tick GAP_US N SPIN_NS
// Reads one line from stdin (so the test can attach first), then calls
// work::Sleeper::nap(US) N times; each call sleeps US microseconds
// (clock_nanosleep, absolute deadline, so a call never returns early).
// Or, with tick, sleeps GAP_US (outside any probed function) before each
// of N calls of work::Sleeper::tick, which spins for SPIN_NS by the
// monotonic clock (read through the vDSO: no syscall) and adds the span
// from its first clock read to its last to a total: what a probe shows
// beyond it is the probes' own cost, and the gap sets how cold the CPU is
// when the call comes (an OSD worker that slept between ops). Prints
// "done" and the calls made (with tick, and the total in ns), and exits.
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <iostream>
#include <string>

namespace work {
class Sleeper {
public:
    __attribute__((noinline)) void nap(unsigned us);
    // unoptimised, like Ceph's functions it starts with push %rbp, which the
    // kernel emulates (as the OSD's probes and the calibration's)
    __attribute__((noinline, optimize("O0"))) void tick(long spin_ns);
    unsigned long naps = 0;
    long long spun_ns = 0;
};

static long long now_ns()
{
    struct timespec t;

    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1000000000LL + t.tv_nsec;
}

void Sleeper::tick(long spin_ns)
{
    long long t0 = now_ns(), t;

    do
        t = now_ns();
    while (t - t0 < spin_ns);
    spun_ns += t - t0;
    naps++;
}

static void pause_us(unsigned us)
{
    struct timespec t = {(time_t)(us / 1000000), (long)(us % 1000000) * 1000};

    while (nanosleep(&t, &t))
        ;
}

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
    bool tick = argc == 5 && std::string(argv[1]) == "tick";
    if (argc != 3 && !tick) {
        std::fprintf(stderr,
                     "usage: sleeper US N | sleeper tick GAP_US N SPIN_NS\n");
        return 2;
    }
    unsigned us = std::strtoul(argv[tick ? 2 : 1], nullptr, 10);
    long n = std::strtol(argv[tick ? 3 : 2], nullptr, 10);
    long spin = tick ? std::strtol(argv[4], nullptr, 10) : 0;
    std::string line;
    std::getline(std::cin, line);
    work::Sleeper s;
    for (long i = 0; i < n; i++) {
        if (tick) {
            work::pause_us(us);
            s.tick(spin);
        } else {
            s.nap(us);
        }
    }
    if (tick)
        std::printf("done %lu %lld\n", s.naps, s.spun_ns);
    else
        std::printf("done %lu\n", s.naps);
    return 0;
}
