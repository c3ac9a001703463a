/* test_fuzz_corpus.c: replay the committed fuzz corpora (tests/fuzz/corpus/) through the
 * fuzz targets under ASan and UBSan, so every input a fuzzer once found interesting is
 * checked on every test run. */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/fuzz/fuzz_targets.h"
#include "tests/harness.h"

static int replay(const char *dir, int (*one)(const uint8_t *, size_t))
{
    DIR *d = opendir(dir);
    if (!d)
        return -1;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.')
            continue;
        char path[1024];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        FILE *f = fopen(path, "rb");
        if (!f)
            continue;
        uint8_t *buf = malloc(1 << 20);
        size_t len = buf ? fread(buf, 1, 1 << 20, f) : 0;
        fclose(f);
        if (buf) {
            uint8_t *exact = malloc(len ? len : 1); /* exact size: ASan sees overreads */
            memcpy(exact, buf, len);
            one(exact, len);
            free(exact);
            n++;
        }
        free(buf);
    }
    closedir(d);
    return n;
}

TEST(fuzz_corpus_frames_replay_clean)
{
    int n = replay("tests/fuzz/corpus/frame", fuzz_frame_one);
    th_note("%d frame inputs", n);
    CHECK(n >= 3);
}

TEST(fuzz_corpus_events_replay_clean)
{
    int n = replay("tests/fuzz/corpus/event", fuzz_event_one);
    th_note("%d event inputs", n);
    CHECK(n >= 10);
}
