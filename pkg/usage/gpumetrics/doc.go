// Package gpumetrics exports package gpustats' samples as Prometheus
// metrics (a prometheus.Collector): `wsl-gpu-ctl metrics --listen` and the
// device plugin serve it. It is never linked into the hook.
//
// A scrape reads the latest sample of a gpustats.Poller, which samples on
// its own period (10 s in both commands, --interval/--metrics-interval):
// per adapter 1 ADAPTER + S SEGMENT + N NODE statistics calls + 1
// QUERYVIDEOMEMORYINFO, plus 2 PROCESS_SEGMENT_GROUP calls per dxg
// process and adapter; node metadata is asked once.
// wsl_gpu_scrape_ioctls and wsl_gpu_scrape_duration_seconds report what
// that sample cost (the names are from when every scrape sampled), and
// wsl_gpu_sample_timestamp_seconds when it was taken. Busy ratios are over
// one period, the same for every scraper however many there are and
// however often they scrape; the first period after a start has none. The
// counter wsl_gpu_engine_running_seconds_total is the one to rate() in
// PromQL over any window.
//
// Label values that others choose (pod, namespace, container and claim
// names, driver names and descriptions) go out through
// printable.Unique: valid UTF-8, no control characters, at most 128
// bytes, and distinct: a value that had to be changed ends in a hash of
// the whole of it, so pods named alike in their first 128 bytes stay two
// series (two equal series fail the whole scrape).
package gpumetrics
