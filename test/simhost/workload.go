package simhost

import "time"

// Engine types (DXGK_ENGINE_TYPE) the simulated nodes report.
const (
	EngineOther       uint32 = 0
	Engine3D          uint32 = 1
	EngineVideoDecode uint32 = 2
	EngineVideoEncode uint32 = 3
	EngineCopy        uint32 = 6
)

// Level is one phase of a quantity that moves over time: it holds Value for
// For, then the next phase begins; the phases repeat. A single phase is a
// constant.
type Level struct {
	For   time.Duration
	Value float64
}

// At is the value at t since the model started.
func At(levels []Level, t time.Duration) float64 {
	if len(levels) == 0 {
		return 0
	}
	var cycle time.Duration
	for _, l := range levels {
		cycle += l.For
	}
	if cycle <= 0 || len(levels) == 1 {
		return levels[0].Value
	}
	t %= cycle
	for _, l := range levels {
		if t < l.For {
			return l.Value
		}
		t -= l.For
	}
	return levels[len(levels)-1].Value
}

// Integral is the integral of the levels from 0 to t (value x seconds):
// the running time of an engine whose busy fraction follows levels.
func Integral(levels []Level, t time.Duration) time.Duration {
	if len(levels) == 0 || t <= 0 {
		return 0
	}
	var cycle time.Duration
	var perCycle float64
	for _, l := range levels {
		cycle += l.For
		perCycle += l.Value * float64(l.For)
	}
	if cycle <= 0 || len(levels) == 1 {
		return time.Duration(levels[0].Value * float64(t))
	}
	total := float64(t/cycle) * perCycle
	rest := t % cycle
	for _, l := range levels {
		d := min(rest, l.For)
		total += l.Value * float64(d)
		rest -= d
		if rest <= 0 {
			break
		}
	}
	return time.Duration(total)
}

// Engine is one node of the adapter: its type, the driver's name for it
// and the fraction of wall time it is busy.
type Engine struct {
	Type uint32
	Name string
	Busy []Level
}

// Segment is one memory segment: its size, whether it maps system memory
// (aperture) and what Windows itself keeps resident in it (the desktop,
// other Windows applications): memory no Linux process accounts for.
type Segment struct {
	Size     uint64
	Aperture bool
	Windows  uint64
}

// ProcessLoad is the memory a Linux process uses on the adapter, matched
// by its command name (the comm of the process that opened /dev/dxg).
type ProcessLoad struct {
	Comm     string
	Local    []Level // bytes
	NonLocal []Level // bytes
}

// AdapterLoad is the modelled load of one adapter.
type AdapterLoad struct {
	Segments  []Segment
	Engines   []Engine
	Processes []ProcessLoad
	// Budget is the local (or, without local memory, non-local) budget
	// QUERYVIDEOMEMORYINFO reports to any process.
	Budget uint64
}

// Workload is the modelled GPU use of a host, by adapter index (host order).
type Workload struct {
	Adapters map[int]AdapterLoad
}

// WorkerComm is the command name of the process tests start to stand for
// a GPU application (test/dxgsim's gpu-worker helper).
const WorkerComm = "gpu-worker"

const gib = 1 << 30
const mib = 1 << 20

func steady(v float64) []Level { return []Level{{For: time.Second, Value: v}} }

// WorkloadFor returns the modelled load of a profile; profiles without one
// report idle engines and empty memory sized like their adapters.
func WorkloadFor(p Profile) Workload {
	w := Workload{Adapters: map[int]AdapterLoad{}}
	for i, a := range p.Adapters {
		w.Adapters[i] = idle(a)
	}
	if p.Name == "nvidia-laptop" {
		// The Intel iGPU shows the Windows desktop; the RTX 3060 runs a
		// CUDA job (a gpu-worker in the VM) that is compute-bound and
		// copies in bursts: copy is busy 40% for 2 s, then 0% for 2 s.
		w.Adapters[0] = AdapterLoad{
			Segments: []Segment{{Size: 8 * gib, Aperture: true, Windows: 600 * mib}},
			Engines: []Engine{
				{Type: Engine3D, Name: "3D", Busy: steady(0.12)},
				{Type: EngineCopy, Name: "Copy", Busy: steady(0)},
				{Type: EngineVideoDecode, Name: "Video Decode", Busy: steady(0.05)},
				{Type: EngineOther, Name: "Compute_0", Busy: steady(0)},
			},
			Budget: 7 * gib,
		}
		w.Adapters[1] = AdapterLoad{
			Segments: []Segment{
				{Size: 6 * gib, Windows: 300 * mib},
				{Size: 8 * gib, Aperture: true, Windows: 50 * mib},
			},
			Engines: []Engine{
				{Type: Engine3D, Name: "3D", Busy: steady(0.03)},
				{Type: EngineCopy, Name: "Copy", Busy: []Level{{For: 2 * time.Second, Value: 0.40}, {For: 2 * time.Second, Value: 0}}},
				{Type: EngineVideoDecode, Name: "Video Decode", Busy: steady(0)},
				{Type: EngineVideoEncode, Name: "Video Encode", Busy: steady(0)},
				{Type: EngineOther, Name: "Compute_0", Busy: steady(0.75)},
				{Type: EngineOther, Name: "Cuda", Busy: steady(0)},
			},
			Processes: []ProcessLoad{
				{Comm: WorkerComm, Local: steady(2 * gib), NonLocal: steady(256 * mib)},
			},
			Budget: 5632 * mib,
		}
	}
	return w
}

func idle(a Adapter) AdapterLoad {
	if a.ComputeOnly() {
		return AdapterLoad{
			Segments: []Segment{{Size: 4 * gib, Aperture: true}},
			Engines:  []Engine{{Type: EngineOther, Name: "Compute", Busy: steady(0)}},
			Budget:   3 * gib,
		}
	}
	return AdapterLoad{
		Segments: []Segment{{Size: 8 * gib, Aperture: true}},
		Engines: []Engine{
			{Type: Engine3D, Name: "3D", Busy: steady(0)},
			{Type: EngineCopy, Name: "Copy", Busy: steady(0)},
		},
		Budget: 7 * gib,
	}
}
