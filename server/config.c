/* config.c: the server's defaults (srv_default_config), apart from main.c so that what
 * runs the server's parts without main (the WebSocket handler's fuzz target) starts from
 * the same settings. main.c parses the flags over them. */
#include <string.h>
#include <unistd.h>

#include "server.h"

srv_config srv_default_config(void)
{
    srv_config c;
    memset(&c, 0, sizeof c);
    c.http_port = 8080;
    c.ws_port = 8081;
    strcpy(c.bind, "127.0.0.1");
    c.backend = SIM_BACKEND_AUTO;
    c.max_sessions = 64;
    c.max_clients_per_session = 256;
    c.max_message_bytes = 65536;
    c.max_events_per_s = 240;
    /* A hundred students, each pinging and paging slices: bounded all the same, so the
     * view token cannot flood the session's worker with queries. */
    c.max_view_events_per_s = 2400;
    c.rate_hz = 60.0;
    c.express_worker = -1; /* sched.c: light sessions keep their beat beside heavy steps */
    /* 1 min at 60 Hz. Deltas of local dents stay small however old the key, joiners get a
     * snapshot anyway, and an object whose delta would cost more than its key re-keys; so
     * the periodic key is only a backstop (0 turns it off). */
    c.keyframe_every = 3600;
    /* A classroom's viewers on a school or hospital network: 250 KiB/s (2 Mbit/s) each
     * leaves room for the slices and everyone else's traffic. */
    c.view_budget_kib = 250;
    /* A 512x512x300 CT of int16 is 150 MiB of voxels; uncompressed DICOM adds a few KiB a
     * slice, a stored zip a hundred bytes a file. 200 MiB takes it, or 400 slices, as sent
     * (a NIfTI .nii.gz of it is a third of that). */
    c.upload_limit = 200LL << 20;
    /* Quotas for a shared server (server/README.md, "Limits and durability"): a school's
     * or a hospital's NAT puts many people behind one address, so per-address limits sit
     * well above what one person needs and well below the server's totals. */
    c.max_sessions_per_address = 8;
    c.idle_expiry_s = 900;
    c.max_http_per_address = 64;
    c.max_http_connections = 1000;
    c.max_ws_per_address = 512; /* a school's classes behind one NAT */
    /* Half the machine: the rest for the process's own (the default model, encoders,
     * frames, uploads on their way) and for whatever else runs there. */
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    c.memory_budget_mib =
        pages > 0 && page > 0 ? (int)((double)pages * (double)page / 2 / 1048576) : 0;
    c.http_timeout_s = 10;
    /* Durability (--state-dir, durable.c): the log is written in the frame that applies an
     * event, so a killed process loses nothing acknowledged; these bound what a crash of
     * the machine loses (a second of events) and the replay after one (a minute). */
    c.snapshot_interval_s = 60;
    c.fsync_interval_ms = 1000;
    if (access("web-client/index.html", R_OK) == 0)
        strcpy(c.data_dir, "web-client");
    return c;
}
