/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/* tests/format/test_gguf_shrink.c — gguf_open on files that are not regular files (refused at once,
 * no wait on a FIFO), gguf_check_size after the mapped file shrinks, and gguf_open_ex's in-memory
 * copy, which a later truncation cannot reach. */
#include "format/gguf.h"
#include "base/status.h"
#include "gguf_builder.h"
#include "test.h"

#include <sys/stat.h>
#include <unistd.h>

int main(void) {
    char dir[] = "/tmp/sb-test-shrink-XXXXXX", path[64], fifo[64];
    if (!mkdtemp(dir)) return 1;
    snprintf(path, sizeof path, "%s/t.gguf", dir);
    snprintf(fifo, sizeof fifo, "%s/fifo", dir);
    gb b = {0};
    const int64_t ne[1] = {16384};
    gb_header(&b, 3, 1, 1);
    gb_kv_str(&b, "general.architecture", "llama");
    gb_tensor(&b, "w", 1, ne, 0 /* F32 */, 0);
    gb_pad(&b, 32);
    for (int i = 0; i < 16384; i++) {
        float v = (float)i;
        gb_put(&b, &v, 4);
    }
    FILE *f = fopen(path, "wb");
    CHECK(f && fwrite(b.p, 1, b.len, f) == b.len && fclose(f) == 0);

    gguf_file g, h;
    CHECK(gguf_open(path, &g) == SB_OK && g.has_fd && !g.heap);
    CHECK(gguf_check_size(&g, path) == SB_OK);
    CHECK(gguf_open_ex(path, true, &h) == SB_OK && h.heap);
    CHECK(truncate(path, 4096) == 0);
    CHECK(gguf_check_size(&g, path) == SB_ERR_IO);
    CHECK(strstr(sb_last_error(), "file changed size since it was loaded") != NULL);
    CHECK(gguf_check_size(&h, path) == SB_OK); /* the copy is not the file */
    float last;
    memcpy(&last, h.tensors[0].data + 4 * 16383, 4);
    CHECK(last == 16383.0f);
    gguf_close(&g);
    gguf_close(&h);
    CHECK(gguf_open(path, &g) == SB_ERR_FORMAT_TENSOR_BOUNDS);

    CHECK(mkfifo(fifo, 0600) == 0);
    CHECK(gguf_open(fifo, &g) == SB_ERR_IO && strstr(sb_last_error(), "is a FIFO, not a regular file"));
    CHECK(gguf_open_ex(dir, true, &g) == SB_ERR_IO && strstr(sb_last_error(), "is a directory"));
    unlink(fifo);
    unlink(path);
    rmdir(dir);
    free(b.p);
    return test_summary();
}
