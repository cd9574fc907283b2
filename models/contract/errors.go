package contract

import (
	"fmt"
	"strings"
)

// ValidationError reports invalid input; Path names the offending member (for
// example "fields[2].options") and Reason says what is wrong in plain English.
type ValidationError struct {
	Path   string
	Reason string
}

// Error returns "path: reason", or only the reason when Path is empty.
func (e *ValidationError) Error() string {
	if e.Path == "" {
		return e.Reason
	}
	return e.Path + ": " + e.Reason
}

// invalid builds a *ValidationError with a formatted reason.
func invalid(path, format string, args ...any) *ValidationError {
	return &ValidationError{Path: path, Reason: fmt.Sprintf(format, args...)}
}

// MissingFieldsError reports required template fields that the caller left
// empty; Keys lists them in the order the fields are declared.
type MissingFieldsError struct {
	Keys []string
}

// Error returns a message such as "missing required field: title".
func (e *MissingFieldsError) Error() string {
	if len(e.Keys) == 1 {
		return "missing required field: " + e.Keys[0]
	}
	return "missing required fields: " + strings.Join(e.Keys, ", ")
}
