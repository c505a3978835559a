package sis

import (
	"errors"
	"fmt"
)

// ErrorClass is the decode error class (R-IDENT-2, R-IDENT-4).
type ErrorClass string

const (
	// Malformed: the message itself is illegal; no codec change can make it processable, so the
	// pump parks it as DEAD(MALFORMED) and it is never replayed.
	Malformed ErrorClass = "MALFORMED"
	// CodecError: the message is well formed but this codec version cannot interpret a value;
	// it is retried and replayable once the codec learns the format.
	CodecError ErrorClass = "CODEC_ERROR"
)

// DecodeError carries the class, the element path (e.g. "/MSG/FLOP/ESTT",
// "/MSG/SCHD/FLTR[2]/GTDT[1]/GOTM") and the reason.
type DecodeError struct {
	Class  ErrorClass
	Path   string
	Reason string
	// Err is the underlying cause when there is one (an encoding/xml syntax error, a time parse
	// error); reachable through errors.Is/As.
	Err error
}

func (e *DecodeError) Error() string {
	return fmt.Sprintf("sis: %s at %s: %s", e.Class, e.Path, e.Reason)
}

func (e *DecodeError) Unwrap() error { return e.Err }

// ClassOf returns the class of err if it is (wraps) a *DecodeError.
func ClassOf(err error) (ErrorClass, bool) {
	var de *DecodeError
	if errors.As(err, &de) {
		return de.Class, true
	}
	return "", false
}

// ErrUnsupportedCharset is wrapped by BytesToText when the body's charset is neither UTF-8 nor
// the GB2312/GBK/GB18030 family; the compat endpoint answers it as "unsupported media type"
// rather than storing text it cannot read.
var ErrUnsupportedCharset = errors.New("sis: unsupported charset")

func malformed(path, reason string, cause error) *DecodeError {
	return &DecodeError{Class: Malformed, Path: path, Reason: reason, Err: cause}
}

func codecError(path, reason string, cause error) *DecodeError {
	return &DecodeError{Class: CodecError, Path: path, Reason: reason, Err: cause}
}
