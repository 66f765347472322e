package sandbox

import (
	"encoding/json"
	"errors"
	"fmt"
)

// Error codes of sandboxd (docs/protocol.md, "Errors").
const (
	CodeParseError          = -32700
	CodeInvalidRequest      = -32600
	CodeMethodNotFound      = -32601
	CodeInvalidParams       = -32602
	CodeInternalError       = -32603
	CodeNoSuchSandbox       = -32001
	CodeBadState            = -32002
	CodeQuotaExceeded       = -32003
	CodeProxmoxError        = -32004
	CodeSSHError            = -32005
	CodeDeadlineExceeded    = -32006
	CodeBusy                = -32007
	CodePermissionDenied    = -32008
	CodeFileError           = -32009
	CodeIdempotencyMismatch = -32010
	CodeShuttingDown        = -32011
)

// RPCError is an error object sent by sandboxd. Errors returned by this package
// wrap it; get it with errors.As. Data holds the error's data; sandboxd's own
// errors always carry "reason", invalid params also "param", file errors
// "errno".
type RPCError struct {
	Code    int
	Message string
	Data    map[string]any
}

func (e *RPCError) Error() string {
	s := fmt.Sprintf("sandboxd: %s (%d)", e.Message, e.Code)
	if r, ok := e.Data["reason"].(string); ok && r != "" {
		s += ": " + r
	}
	return s
}

// UnmarshalJSON accepts any data value; one that is not an object is kept
// under the key "value".
func (e *RPCError) UnmarshalJSON(b []byte) error {
	var raw struct {
		Code    int             `json:"code"`
		Message string          `json:"message"`
		Data    json.RawMessage `json:"data"`
	}
	if err := json.Unmarshal(b, &raw); err != nil {
		return err
	}
	e.Code, e.Message, e.Data = raw.Code, raw.Message, nil
	if len(raw.Data) > 0 && string(raw.Data) != "null" {
		if err := json.Unmarshal(raw.Data, &e.Data); err != nil {
			var v any
			_ = json.Unmarshal(raw.Data, &v)
			e.Data = map[string]any{"value": v}
		}
	}
	return nil
}

// ErrConnectionLost: the connection to sandboxd closed before the reply came
// (the daemon stopped or restarted). The call may or may not have taken effect.
var ErrConnectionLost = errors.New("sandbox: connection to sandboxd lost before the reply")

// IsCode reports whether err wraps an RPCError with the given code.
func IsCode(err error, code int) bool {
	var e *RPCError
	return errors.As(err, &e) && e.Code == code
}
