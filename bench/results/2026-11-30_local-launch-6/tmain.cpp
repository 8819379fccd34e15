#include <cstdio>
#include <cstdlib>
#include <ctime>
int main() { timespec t; clock_gettime(CLOCK_MONOTONIC, &t); if (getenv("DLT")) fprintf(stderr, "T main 0 %.3f\n", t.tv_sec*1e3+t.tv_nsec/1e6); return 0; }
