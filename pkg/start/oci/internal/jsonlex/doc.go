// Package jsonlex walks a JSON document without reflection, for decoders
// that must be cheap on their first call: pkg/start/oci decodes a hook's state
// and config.json with it, once per process, where json.Unmarshal's first
// call costs about 1 ms.
//
// A Decoder checks JSON's grammar as it walks (what json.Valid checks) and
// decodes scalars, strings, string arrays and string maps exactly as
// encoding/json does into the same Go types. It decides only what it is
// sure encoding/json decides the same way, and reports false on the rest:
// a document nested deeper than MaxDepth, an object key with an escape or
// a non-ASCII byte (encoding/json folds U+017F to 's' when it matches
// field names), a key given twice (encoding/json merges the values), a
// value of the wrong JSON type, a number that does not fit. The caller
// then decodes the document with encoding/json, so its results and errors
// stay encoding/json's.
//
// It is a stopgap: once encoding/json/jsontext leaves GOEXPERIMENT, its
// Decoder (ReadToken, ReadValue, SkipValue) takes this package's place,
// and only the callers' field tables remain. The package is internal so
// that swap changes no public API.
package jsonlex
