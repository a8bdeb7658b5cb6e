// Package gpumetrics exports package gpustats' samples as Prometheus
// metrics (a prometheus.Collector): `wsl-gpu-ctl metrics --listen` and the
// device plugin serve it. It is never linked into the hook.
//
// Every scrape takes one gpustats sample: per adapter 1 ADAPTER + S
// SEGMENT + N NODE statistics calls + 1 QUERYVIDEOMEMORYINFO, plus 2
// PROCESS_SEGMENT_GROUP calls per dxg process and adapter; node metadata is
// asked once. wsl_gpu_scrape_ioctls and wsl_gpu_scrape_duration_seconds
// report what the scrape cost. Busy ratios are over the time since the
// previous scrape (any scraper); the counter wsl_gpu_engine_running_seconds_total
// is the one to rate() in PromQL.
package gpumetrics
