package sandbox

// The JSON-RPC methods this package calls, in one place (docs/protocol.md).
// The daemon's own list is its OpenRPC document (rpc.discover).
const (
	methodCreate      = "sandbox.create"
	methodGet         = "sandbox.get"
	methodList        = "sandbox.list"
	methodRenew       = "sandbox.renew"
	methodResize      = "sandbox.resize"
	methodSetInternet = "sandbox.set_internet"
	methodDestroy     = "sandbox.destroy"
	methodExec        = "sandbox.exec"
	methodFileWrite   = "file.write"
	methodFileRead    = "file.read"
	methodStatus      = "daemon.status"
	methodDiscover    = "rpc.discover"
)

// Keys of the limits this package reads from the x-limits member of the
// daemon's OpenRPC document.
const (
	limitTimeoutMsMax = "timeout_ms_max"
	limitDataMaxBytes = "data_max_bytes"
)
