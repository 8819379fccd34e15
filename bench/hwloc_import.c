// Times hwloc's import of an XML export as dlaunch makes it (built-in XML reader, I/O filter "important"):
// 50 imports, three sets. bench/results/2026-11-29_local-launch-4/README.txt says how it was used.
//   gcc -O2 -o hwloc_import bench/hwloc_import.c -lhwloc
//   HWLOC_PLUGINS_BLACKLIST=hwloc_gl,hwloc_opencl,hwloc_xml_libxml,hwloc_pci ./hwloc_import EXPORT.xml [nocache]
#include <hwloc.h>
#include <stdio.h>
#include <time.h>
int main(int c, char** v) {
    struct timespec a, b;
    for (int r = 0; r < 3; r++) {
        clock_gettime(CLOCK_MONOTONIC, &a);
        for (int i = 0; i < 50; i++) {
            hwloc_topology_t t;
            hwloc_topology_init(&t);
            hwloc_topology_set_io_types_filter(t, HWLOC_TYPE_FILTER_KEEP_IMPORTANT);
            if (c > 2) {
                hwloc_topology_set_cache_types_filter(t, HWLOC_TYPE_FILTER_KEEP_NONE);
                hwloc_topology_set_icache_types_filter(t, HWLOC_TYPE_FILTER_KEEP_NONE);
                hwloc_topology_set_type_filter(t, HWLOC_OBJ_MEMCACHE, HWLOC_TYPE_FILTER_KEEP_NONE);
            }
            hwloc_topology_set_xml(t, v[1]);
            hwloc_topology_load(t);
            if (i == 0 && r == 0)
                printf("%d PUs, %d PCI devices\n", hwloc_get_nbobjs_by_depth(t, hwloc_topology_get_depth(t) - 1),
                       hwloc_get_nbobjs_by_type(t, HWLOC_OBJ_PCI_DEVICE));
            hwloc_topology_destroy(t);
        }
        clock_gettime(CLOCK_MONOTONIC, &b);
        printf("%.3f ms per load\n", ((b.tv_sec - a.tv_sec) * 1e3 + (b.tv_nsec - a.tv_nsec) / 1e6) / 50);
    }
}
