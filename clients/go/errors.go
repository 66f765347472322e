package sandbox

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
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

// Error says the message, the code and the reason, and names the parameter
// and the path the error is about when the reason does not already.
func (e *RPCError) Error() string {
	s := fmt.Sprintf("sandboxd: %s (%d)", e.Message, e.Code)
	r := e.Reason()
	if r != "" {
		s += ": " + r
	}
	for _, k := range []string{"param", "path"} {
		if v := e.str(k); v != "" && !strings.Contains(r, v) {
			s += fmt.Sprintf(" (%s %s)", k, v)
		}
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

// Sentinels for errors.Is, one per error code: errors.Is(err, ErrBusy) holds
// for any error wrapping an RPCError with that code, whatever its data.
var (
	ErrParse               = &RPCError{Code: CodeParseError, Message: "Parse error"}
	ErrInvalidRequest      = &RPCError{Code: CodeInvalidRequest, Message: "Invalid Request"}
	ErrMethodNotFound      = &RPCError{Code: CodeMethodNotFound, Message: "Method not found"}
	ErrInvalidParams       = &RPCError{Code: CodeInvalidParams, Message: "Invalid params"}
	ErrInternal            = &RPCError{Code: CodeInternalError, Message: "Internal error"}
	ErrNoSuchSandbox       = &RPCError{Code: CodeNoSuchSandbox, Message: "No such sandbox"}
	ErrBadState            = &RPCError{Code: CodeBadState, Message: "Bad state"}
	ErrQuotaExceeded       = &RPCError{Code: CodeQuotaExceeded, Message: "Quota exceeded"}
	ErrProxmox             = &RPCError{Code: CodeProxmoxError, Message: "Proxmox error"}
	ErrSSH                 = &RPCError{Code: CodeSSHError, Message: "SSH error"}
	ErrDeadlineExceeded    = &RPCError{Code: CodeDeadlineExceeded, Message: "Deadline exceeded"}
	ErrBusy                = &RPCError{Code: CodeBusy, Message: "Busy"}
	ErrPermissionDenied    = &RPCError{Code: CodePermissionDenied, Message: "Permission denied"}
	ErrFile                = &RPCError{Code: CodeFileError, Message: "File error"}
	ErrIdempotencyMismatch = &RPCError{Code: CodeIdempotencyMismatch, Message: "Idempotency mismatch"}
	ErrShuttingDown        = &RPCError{Code: CodeShuttingDown, Message: "Shutting down"}
)

// Is makes errors.Is(err, ErrBusy) (any of the sentinels above, or any
// *RPCError) match every RPCError with the same code.
func (e *RPCError) Is(target error) bool {
	t, ok := target.(*RPCError)
	return ok && t.Code == e.Code
}

// Reason is Data["reason"]: why the call failed ("" when absent).
func (e *RPCError) Reason() string { return e.str("reason") }

// Param is Data["param"]: the parameter an invalid-params error names.
func (e *RPCError) Param() string { return e.str("param") }

// Errno is Data["errno"]: the errno name of a file error ("ENOENT").
func (e *RPCError) Errno() string { return e.str("errno") }

// Path is Data["path"]: the path an error is about, when it names one.
func (e *RPCError) Path() string { return e.str("path") }

func (e *RPCError) str(key string) string {
	s, _ := e.Data[key].(string)
	return s
}

// ErrConnectionLost: the connection to sandboxd closed before the reply came
// (the daemon stopped or restarted). The call may or may not have taken effect.
var ErrConnectionLost = errors.New("sandbox: connection to sandboxd lost before the reply")

// IsCode reports whether err wraps an RPCError with the given code.
func IsCode(err error, code int) bool {
	var e *RPCError
	return errors.As(err, &e) && e.Code == code
}
