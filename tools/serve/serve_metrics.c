/* SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception */
/*
 * tools/serve/serve_metrics.c — GET /metrics in the Prometheus text format (version 0.0.4):
 * request counters by outcome, prompt / cached / generated token counters and the seconds spent
 * on them, gauges for the queue depth, busy slots and the average prefill and decode tok/s
 * (names after llama-server's llamacpp:* set, prefixed sonicboom_).
 */
#include "serve.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Append one metric (HELP, TYPE and value lines) to b. */
static void metric(serve_buf *b, const char *name, const char *type, const char *help, double v) {
    char line[512];
    int n = snprintf(line, sizeof line, "# HELP sonicboom_%s %s\n# TYPE sonicboom_%s %s\nsonicboom_%s %.17g\n", name, help,
                     name, type, name, v);
    if (n > 0 && (size_t)n < sizeof line) serve_buf_add(b, line, (size_t)n);
}

char *serve_metrics_text(serve_engine *e) {
    serve_metrics *m = &e->metrics;
    serve_buf b = {0};
    double prompt_s = (double)atomic_load(&m->prompt_us) / 1e6, pred_s = (double)atomic_load(&m->predicted_us) / 1e6;
    double prompt_n = (double)atomic_load(&m->prompt_tokens), cached_n = (double)atomic_load(&m->cached_tokens);
    double pred_n = (double)atomic_load(&m->predicted_tokens);
    metric(&b, "requests_total", "counter", "generation requests completed", (double)atomic_load(&m->requests_ok));
    metric(&b, "requests_failed_total", "counter", "generation requests that failed in the engine",
           (double)atomic_load(&m->requests_failed));
    metric(&b, "requests_cancelled_total", "counter", "generation requests cancelled (client gone)",
           (double)atomic_load(&m->requests_cancelled));
    metric(&b, "requests_rejected_total", "counter", "requests refused with 429 (queue full)",
           (double)atomic_load(&m->rejected_queue_full));
    metric(&b, "http_errors_total", "counter", "requests answered with a 4xx/5xx error", (double)atomic_load(&m->http_errors));
    metric(&b, "prompt_tokens_total", "counter", "prompt tokens of completed choices 0", prompt_n);
    metric(&b, "prompt_tokens_cached_total", "counter", "prompt tokens reused from a slot's cache", cached_n);
    metric(&b, "prompt_seconds_total", "counter", "seconds spent in prefill", prompt_s);
    metric(&b, "tokens_predicted_total", "counter", "generated tokens", pred_n);
    metric(&b, "tokens_predicted_seconds_total", "counter", "seconds spent decoding", pred_s);
    metric(&b, "prompt_tokens_seconds", "gauge", "average prefill throughput (tokens/s)",
           prompt_s > 0 ? (prompt_n - cached_n) / prompt_s : 0);
    metric(&b, "predicted_tokens_seconds", "gauge", "average decode throughput per slot (tokens/s)", pred_s > 0 ? pred_n / pred_s : 0);
    metric(&b, "requests_processing", "gauge", "slots busy now", (double)atomic_load(&m->processing));
    metric(&b, "requests_deferred", "gauge", "requests waiting in the queue", (double)serve_engine_queued(e));
    metric(&b, "queue_capacity", "gauge", "queue size (--queue-size)", (double)e->cfg->queue_size);
    metric(&b, "slots", "gauge", "slots (--parallel)", (double)e->cfg->parallel);
    metric(&b, "n_ctx", "gauge", "context tokens per slot", (double)e->n_ctx);
    sb_engine_stats es;
    serve_batch_stats(e->batch, &es); /* zeros without continuous batching */
    metric(&b, "kv_blocks", "gauge", "KV cache blocks of the batched engine", (double)es.n_blocks);
    metric(&b, "kv_blocks_used", "gauge", "KV blocks held by running sequences", (double)es.n_blocks_used);
    metric(&b, "kv_blocks_cached", "gauge", "KV blocks kept for the prefix cache (evictable)", (double)es.n_blocks_cached);
    metric(&b, "prefix_cache_hit_tokens_total", "counter", "prompt positions taken from the prefix cache", (double)es.n_prefix_hit_tokens);
    metric(&b, "kv_evictions_total", "counter", "cached KV blocks given up for new ones", (double)es.n_evictions);
    metric(&b, "batch_steps_total", "counter", "forward steps of the batched engine", (double)es.n_steps);
    metric(&b, "batch_tokens_total", "counter", "tokens those steps evaluated", (double)es.n_tokens);
    metric(&b, "batch_plans_built_total", "counter", "step plans the batched engine built (at start-up: every step class)",
           (double)es.n_plans_built);
    metric(&b, "batch_graph_captures_total", "counter", "CUDA Graphs the batched engine captured (0 on the CPU)", (double)es.n_graph_captures);
    return b.data;
}
