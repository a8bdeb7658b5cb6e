// Package hostdelay waits out a simulated round trip to the Windows host
// precisely: the test hosts (test/latencyfs's file server, dxgsim's
// --host-latency) charge each request a latency of about 100 µs, and Go's
// time.Sleep cannot wait that long. The runtime waits for timers in
// epoll_pwait, whose timeout is in whole milliseconds, so on a process with
// nothing else to do a 100 µs sleep takes about 1.1 ms: ten times the
// latency the benchmarks say they model.
package hostdelay
