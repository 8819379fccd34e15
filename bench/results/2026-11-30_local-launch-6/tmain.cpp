// A C++ program whose main() only returns, with phases.patch's DLT=1 mark ("T main 0 <CLOCK_MONOTONIC ms>"),
// for the start of a process against dlaunch's. Built like dlaunch:
//   g++ -O2 -static-libstdc++ -static-libgcc -Wl,-z,now -pie -fPIE -o tmain_st tmain.cpp
//   g++ -O2 -static-libstdc++ -static-libgcc -Wl,-z,now -pie -fPIE -o tmain_hw2 tmain.cpp -Wl,--no-as-needed -lhwloc
#include <cstdio>
#include <cstdlib>
#include <ctime>

int main() {
    timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    if (std::getenv("DLT")) std::fprintf(stderr, "T main 0 %.3f\n", t.tv_sec * 1e3 + t.tv_nsec / 1e6);
    return 0;
}
