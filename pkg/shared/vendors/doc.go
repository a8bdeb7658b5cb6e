// Package vendors is the one table of the GPU and NPU vendors the project
// tells apart, and the one classification of an adapter into what it is
// for (a GPU, an NPU, a software rasterizer). Every other package reads
// both from here: a PCI or ACPI vendor id spelled anywhere else is a bug
// (TestNoVendorIDOutsideTheTable fails on it).
//
// # Model
//
// A [Row] is one vendor as users name it ("amd"): its PCI and ACPI vendor
// ids, the CDI kind engines turn --gpus into for it, the extended resource
// a device plugin advertises its GPUs under, and whether its compute-only
// adapters are GPUs. An [ID] is one vendor id as the host reports it: one
// vendor may own several (AMD's GPUs carry ATI's 0x1002, its Ryzen AI
// NPUs AMD's own 0x1022), and an id may fix the kind of every adapter
// carrying it.
//
// [Classify] decides the kind from the PCI vendor id and the adapter's
// type flags only, so the hook, which enumerates without the type on its
// fast path, still tells AMD's NPU (0x1022) from its Radeon GPUs (0x1002):
// the vendors whose kind needs the flags (Intel's and Qualcomm's GPUs and
// NPUs share an id) have no CDI kind of their own.
//
// Adding a vendor is one row here (plus its ids) and, when its containers
// need more than the driver folders, its stack in package vendorstack. A
// row with a Resource is also the device plugin's key <name>_resource:
// config/resources.go is generated from the table (go test ./config -run
// TestResourcesFile -update), and the key then wants its line in the
// shipped config/config.toml, docs/configuration.md regenerated and the
// chart's resources entry (values.yaml, values.schema.json); a test fails
// until each is there.
//
// The package imports nothing: the hook links it on every start.
package vendors
